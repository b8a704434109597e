"""OTLP trace spans as tokenbench reads and writes them: the few fields of an
``ExportTraceServiceRequest`` that carry a server's per-request timings (docs/traces.md).

Both OTLP/HTTP encodings are read: protobuf (``application/x-protobuf``) by a small
decoder of the protobuf wire format written here (it reads only the fields below and
skips every other one; no recursion beyond the fixed message nesting, so a hostile body
costs at most one pass over its bytes), and JSON (``application/json``: lowerCamelCase
names, hex trace ids, 64-bit integers as strings). The simulator writes protobuf with
:func:`encode_request`.

What a span means is vLLM's: its ``llm_request`` span carries ``gen_ai.request.id`` (the
OpenAI response id, ``chatcmpl-...``) and ``gen_ai.latency.*`` durations in seconds
(floats). A span names the provider it is for by a ``tokenbench.provider`` attribute (on
the span or its resource), else by its resource's ``service.name``; and it may name its
run by ``tokenbench.run_id``. :func:`server_span` turns a decoded span into those
figures, or says why it is dropped.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from typing import Final

# Attribute names as vLLM sets them (vllm/tracing.py, SpanAttributes).
REQUEST_ID: Final = "gen_ai.request.id"
TIME_IN_QUEUE: Final = "gen_ai.latency.time_in_queue"
TIME_TO_FIRST_TOKEN: Final = "gen_ai.latency.time_to_first_token"
TIME_IN_PREFILL: Final = "gen_ai.latency.time_in_model_prefill"
TIME_IN_DECODE: Final = "gen_ai.latency.time_in_model_decode"
E2E: Final = "gen_ai.latency.e2e"
# How a span says which provider of a scenario (and which run) it is for.
PROVIDER: Final = "tokenbench.provider"
RUN_ID: Final = "tokenbench.run_id"
SERVICE_NAME: Final = "service.name"

# Bounds on what one span may carry (a longer id or name is hostile, not truncated).
MAX_ATTRIBUTES: Final = 256  # per span or resource; more are ignored
MAX_ID_CHARS: Final = 256
MAX_SPAN_SECONDS: Final = 86_400.0  # a duration beyond a day is not a request's

Scalar = str | bool | int | float | None


class OtlpError(ValueError):
    """The body is not an OTLP trace export (the whole request is refused, 400)."""


@dataclass(slots=True)
class RawSpan:
    """One decoded span: its scalar attributes and its resource's (a value that is not
    a scalar, or a string that is not UTF-8, is kept as ``INVALID``)."""

    name: str = ""
    trace_id: str = ""
    attributes: dict[str, object] = field(default_factory=dict)
    resource: dict[str, object] = field(default_factory=dict)


INVALID: Final = object()  # an attribute value of no usable type


@dataclass(frozen=True, slots=True)
class ServerSpan:
    """A server's timings of one request, as one span reported them (ns; None: not said)."""

    provider: str
    request_id: str
    run_id: str | None
    trace_id: str
    name: str
    queue_ns: int | None
    ttft_ns: int | None
    prefill_ns: int | None
    decode_ns: int | None
    e2e_ns: int | None


_DURATIONS: Final = (TIME_IN_QUEUE, TIME_TO_FIRST_TOKEN, TIME_IN_PREFILL, TIME_IN_DECODE, E2E)


def server_span(raw: RawSpan) -> ServerSpan | str:
    """The timings a span reports, or why it is dropped (a short reason): no request id,
    no provider, no timing at all, or a value of the wrong type or out of range."""
    request_id = raw.attributes.get(REQUEST_ID)
    if not isinstance(request_id, str) or not 0 < len(request_id) <= MAX_ID_CHARS:
        return "no request id"
    provider = _text(raw.attributes.get(PROVIDER), raw.resource.get(PROVIDER))
    provider = provider or _text(raw.resource.get(SERVICE_NAME))
    if provider is None:
        return "no provider"
    named_run = raw.attributes.get(RUN_ID, raw.resource.get(RUN_ID))
    run_id = _text(named_run)
    if named_run is not None and run_id is None:
        return "bad run id"
    durations: list[int | None] = []
    for name in _DURATIONS:
        value = raw.attributes.get(name)
        if value is None:
            durations.append(None)
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"{name} is not a number"
        seconds = float(value)
        if not math.isfinite(seconds) or not 0 <= seconds <= MAX_SPAN_SECONDS:
            return f"{name} out of range"
        durations.append(round(seconds * 1e9))
    if all(value is None for value in durations):
        return "no timings"
    queue, ttft, prefill, decode, e2e = durations
    return ServerSpan(
        provider, request_id, run_id, raw.trace_id[:64], raw.name[:MAX_ID_CHARS],
        queue, ttft, prefill, decode, e2e,
    )  # fmt: skip


def _text(*values: object) -> str | None:
    for value in values:
        if isinstance(value, str) and 0 < len(value) <= MAX_ID_CHARS:
            return value
    return None


# --- protobuf ---------------------------------------------------------------------------
# Field numbers of opentelemetry/proto/{collector/trace,trace,resource,common}/v1.
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


def decode_protobuf(body: bytes) -> list[RawSpan]:
    """The spans of a protobuf ``ExportTraceServiceRequest``; OtlpError if malformed."""
    spans: list[RawSpan] = []
    view = memoryview(body)
    for number, _, value in _fields(view):
        if number == 1 and isinstance(value, memoryview):  # resource_spans
            _resource_spans(value, spans)
    return spans


def _resource_spans(data: memoryview, out: list[RawSpan]) -> None:
    resource: dict[str, object] = {}
    scopes: list[memoryview] = []
    for number, _, value in _fields(data):
        if not isinstance(value, memoryview):
            continue
        if number == 1:  # resource
            for inner, _, attribute in _fields(value):
                if inner == 1 and isinstance(attribute, memoryview):  # attributes
                    _key_value(attribute, resource)
        elif number == 2:  # scope_spans
            scopes.append(value)
    for scope in scopes:
        for number, _, value in _fields(scope):
            if number == 2 and isinstance(value, memoryview):  # spans
                out.append(_span(value, resource))


def _span(data: memoryview, resource: dict[str, object]) -> RawSpan:
    span = RawSpan(resource=resource)
    for number, _, value in _fields(data):
        if not isinstance(value, memoryview):
            continue
        if number == 1:  # trace_id
            span.trace_id = bytes(value).hex()
        elif number == 5:  # name
            span.name = _utf8(value) or ""
        elif number == 9:  # attributes
            _key_value(value, span.attributes)
    return span


def _key_value(data: memoryview, into: dict[str, object]) -> None:
    if len(into) >= MAX_ATTRIBUTES:
        return
    key: str | None = None
    value: object = None
    for number, _, item in _fields(data):
        if number == 1 and isinstance(item, memoryview):
            key = _utf8(item)
        elif number == 2 and isinstance(item, memoryview):
            value = _any_value(item)
    if key is not None:
        into[key] = value


def _any_value(data: memoryview) -> object:
    value: object = None
    for number, wire, item in _fields(data):
        if number == 1 and isinstance(item, memoryview):
            text = _utf8(item)
            value = INVALID if text is None else text
        elif number == 2 and wire == _VARINT and isinstance(item, int):
            value = bool(item)
        elif number == 3 and wire == _VARINT and isinstance(item, int):
            value = item - (1 << 64) if item >= 1 << 63 else item  # int64, two's complement
        elif number == 4 and wire == _I64 and isinstance(item, int):
            value = struct.unpack("<d", item.to_bytes(8, "little"))[0]
        else:  # arrays, key-value lists, bytes, or a wrong wire type: not a timing
            value = INVALID
    return value


def _utf8(data: memoryview) -> str | None:
    try:
        return bytes(data).decode()
    except UnicodeDecodeError:
        return None


def _fields(data: memoryview) -> list[tuple[int, int, int | memoryview]]:
    """The (field number, wire type, value) of one message's fields: an int for varint
    and fixed-width fields, the bytes of a length-delimited one."""
    fields: list[tuple[int, int, int | memoryview]] = []
    position, end = 0, len(data)
    while position < end:
        tag, position = _varint(data, position)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise OtlpError("field number 0")
        if wire == _VARINT:
            value, position = _varint(data, position)
            fields.append((number, wire, value))
        elif wire in (_I64, _I32):
            width = 8 if wire == _I64 else 4
            if position + width > end:
                raise OtlpError("truncated fixed-width field")
            value = int.from_bytes(data[position : position + width], "little")
            fields.append((number, wire, value))
            position += width
        elif wire == _LEN:
            length, position = _varint(data, position)
            if position + length > end:
                raise OtlpError("truncated length-delimited field")
            fields.append((number, wire, data[position : position + length]))
            position += length
        else:  # groups (3, 4) are not used by OTLP; 6 and 7 do not exist
            raise OtlpError(f"wire type {wire}")
    return fields


def _varint(data: memoryview, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if position >= len(data) or shift > 63:
            raise OtlpError("bad varint")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result & ((1 << 64) - 1), position
        shift += 7


# --- JSON -------------------------------------------------------------------------------


def decode_json(document: object) -> list[RawSpan]:
    """The spans of an OTLP/JSON ``ExportTraceServiceRequest`` (already parsed);
    OtlpError if its shape is not one."""
    if not isinstance(document, dict):
        raise OtlpError("not a JSON object")
    spans: list[RawSpan] = []
    for resource_spans in _list(document, "resourceSpans"):
        resource: dict[str, object] = {}
        resource_object = resource_spans.get("resource")
        if isinstance(resource_object, dict):
            _json_attributes(resource_object, resource)
        for scope in _list(resource_spans, "scopeSpans"):
            for item in _list(scope, "spans"):
                span = RawSpan(resource=resource)
                trace_id, name = item.get("traceId"), item.get("name")
                span.trace_id = trace_id if isinstance(trace_id, str) else ""
                span.name = name if isinstance(name, str) else ""
                _json_attributes(item, span.attributes)
                spans.append(span)
    return spans


def _list(parent: dict[str, object], name: str) -> list[dict[str, object]]:
    value = parent.get(name, [])
    if not isinstance(value, list):
        raise OtlpError(f"{name} is not a list")
    return [item for item in value if isinstance(item, dict)]


def _json_attributes(parent: dict[str, object], into: dict[str, object]) -> None:
    for attribute in _list(parent, "attributes")[:MAX_ATTRIBUTES]:
        key, value = attribute.get("key"), attribute.get("value")
        if isinstance(key, str):
            into[key] = _json_value(value) if isinstance(value, dict) else INVALID


def _json_value(value: dict[str, object]) -> object:
    if "stringValue" in value:
        text = value["stringValue"]
        return text if isinstance(text, str) else INVALID
    if "boolValue" in value:
        flag = value["boolValue"]
        return flag if isinstance(flag, bool) else INVALID
    if "intValue" in value:  # int64 as a decimal string (or, from lax encoders, a number)
        number = value["intValue"]
        if isinstance(number, str) and number.lstrip("-").isdigit() and len(number) <= 20:
            return int(number)
        return number if isinstance(number, int) and not isinstance(number, bool) else INVALID
    if "doubleValue" in value:  # a number, or "NaN"/"Infinity" (refused later as out of range)
        number = value["doubleValue"]
        if isinstance(number, int | float) and not isinstance(number, bool):
            return float(number)
        if isinstance(number, str) and number in ("NaN", "Infinity", "-Infinity"):
            return float(number.replace("Infinity", "inf"))
        return INVALID
    return INVALID


# --- encoding (the simulator's exporter) -------------------------------------------------


def encode_request(resource: dict[str, Scalar], spans: list[EncodedSpan]) -> bytes:
    """A protobuf ``ExportTraceServiceRequest`` of ``spans`` under one resource."""
    resource_bytes = b"".join(_len_field(1, _key_value_bytes(k, v)) for k, v in resource.items())
    scope = _len_field(1, _len_field(1, b"tokenbench.simulator"))
    scope += b"".join(_len_field(2, span.encode()) for span in spans)
    resource_spans = _len_field(1, resource_bytes) + _len_field(2, scope)
    return _len_field(1, resource_spans)


@dataclass(frozen=True, slots=True)
class EncodedSpan:
    """A span to encode: ids, name, times (Unix ns) and scalar attributes."""

    trace_id: bytes
    span_id: bytes
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Scalar]

    def encode(self) -> bytes:
        """Its protobuf ``Span`` (kind SERVER, as vLLM's ``llm_request``)."""
        out = _len_field(1, self.trace_id) + _len_field(2, self.span_id)
        out += _len_field(5, self.name.encode()) + _tag(6, _VARINT) + _varint_bytes(2)
        out += _tag(7, _I64) + self.start_ns.to_bytes(8, "little")
        out += _tag(8, _I64) + self.end_ns.to_bytes(8, "little")
        out += b"".join(_len_field(9, _key_value_bytes(k, v)) for k, v in self.attributes.items())
        return out


def _key_value_bytes(key: str, value: Scalar) -> bytes:
    if isinstance(value, bool):
        any_value = _tag(2, _VARINT) + _varint_bytes(int(value))
    elif isinstance(value, int):
        any_value = _tag(3, _VARINT) + _varint_bytes(value & ((1 << 64) - 1))
    elif isinstance(value, float):
        any_value = _tag(4, _I64) + struct.pack("<d", value)
    elif isinstance(value, str):
        any_value = _len_field(1, value.encode())
    else:
        any_value = b""
    return _len_field(1, key.encode()) + _len_field(2, any_value)


def _tag(number: int, wire: int) -> bytes:
    return _varint_bytes(number << 3 | wire)


def _len_field(number: int, payload: bytes) -> bytes:
    return _tag(number, _LEN) + _varint_bytes(len(payload)) + payload


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def export_response(rejected: int, message: str) -> tuple[bytes, dict[str, object]]:
    """An ``ExportTraceServiceResponse`` in both encodings: its ``partial_success`` says
    how many spans were rejected and why (empty when none were)."""
    if not rejected:
        return b"", {}
    partial = _tag(1, _VARINT) + _varint_bytes(rejected) + _len_field(2, message.encode())
    return _len_field(1, partial), {
        "partialSuccess": {"rejectedSpans": str(rejected), "errorMessage": message}
    }
