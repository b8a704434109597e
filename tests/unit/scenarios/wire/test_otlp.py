"""OTLP decoding (scenarios/wire/otlp.py): protobuf and JSON bodies to spans, vLLM's
attributes to server timings, and what is dropped or refused."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from scenarios.wire import otlp
from scenarios.wire.otlp import EncodedSpan, OtlpError, RawSpan, ServerSpan

VLLM = {
    otlp.REQUEST_ID: "chatcmpl-abc123",
    otlp.TIME_IN_QUEUE: 0.25,
    otlp.TIME_TO_FIRST_TOKEN: 0.5,
    otlp.TIME_IN_PREFILL: 0.2,
    otlp.TIME_IN_DECODE: 1.5,
    otlp.E2E: 2.0,
    "gen_ai.usage.prompt_tokens": 12,
    "gen_ai.request.n": True,
}


def _protobuf(attributes: dict[str, Any], resource: dict[str, Any] | None = None) -> bytes:
    span = EncodedSpan(b"\x01" * 16, b"\x02" * 8, "llm_request", 10, 20, attributes)
    return otlp.encode_request(resource or {"service.name": "vllm-a"}, [span])


def _json(attributes: list[dict[str, Any]], service: str = "vllm-a") -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": service}}]
                },
                "scopeSpans": [
                    {
                        "scope": {"name": "vllm.llm_engine"},
                        "spans": [
                            {
                                "traceId": "5b8efff798038103d269b633813fc60c",
                                "spanId": "eee19b7ec3c1b174",
                                "name": "llm_request",
                                "kind": 2,
                                "startTimeUnixNano": "1544712660000000000",
                                "endTimeUnixNano": "1544712661000000000",
                                "attributes": attributes,
                            }
                        ],
                    }
                ],
            }
        ]
    }


def test_protobuf_round_trip_gives_vllm_timings_in_ns() -> None:
    spans = otlp.decode_protobuf(_protobuf(VLLM))
    assert len(spans) == 1
    raw = spans[0]
    assert raw.name == "llm_request" and raw.trace_id == "01" * 16
    assert raw.resource == {"service.name": "vllm-a"}
    assert raw.attributes["gen_ai.usage.prompt_tokens"] == 12
    assert otlp.server_span(raw) == ServerSpan(
        "vllm-a", "chatcmpl-abc123", None, "01" * 16, "llm_request",
        250_000_000, 500_000_000, 200_000_000, 1_500_000_000, 2_000_000_000,
    )  # fmt: skip


def test_protobuf_bytes_as_the_wire_format_defines_them() -> None:
    # Built by hand from the .proto field numbers: request.1 > resource_spans.2 >
    # scope_spans.2 > span.9 > key_value(1: key, 2: any_value(4: double)).
    any_value = b"\x21" + struct.pack("<d", 0.125)  # field 4, wire type 1
    key = otlp.TIME_IN_QUEUE.encode()
    key_value = b"\x0a" + bytes([len(key)]) + key + b"\x12" + bytes([len(any_value)]) + any_value
    rid = b"\x0a\x11gen_ai.request.id\x12\x05\x0a\x03r-1"
    span = b"\x4a" + bytes([len(key_value)]) + key_value + b"\x4a" + bytes([len(rid)]) + rid
    scope = b"\x12" + bytes([len(span)]) + span
    resource_attr = b"\x0a\x0cservice.name\x12\x03\x0a\x01p"
    resource = b"\x0a" + bytes([len(resource_attr)]) + resource_attr
    resource_spans = (
        b"\x0a" + bytes([len(resource)]) + resource + b"\x12" + bytes([len(scope)]) + scope
    )
    body = b"\x0a" + bytes([len(resource_spans)]) + resource_spans
    (raw,) = otlp.decode_protobuf(body)
    span_figures = otlp.server_span(raw)
    assert isinstance(span_figures, ServerSpan)
    assert (span_figures.provider, span_figures.request_id) == ("p", "r-1")
    assert span_figures.queue_ns == 125_000_000 and span_figures.ttft_ns is None


def test_protobuf_negative_int_and_unknown_fields_are_read_or_skipped() -> None:
    body = _protobuf({otlp.REQUEST_ID: "x", "neg": -5, otlp.E2E: 1})
    (raw,) = otlp.decode_protobuf(body + b"\x98\x01\x07")  # an unknown varint field 19
    assert raw.attributes["neg"] == -5
    figures = otlp.server_span(raw)
    assert isinstance(figures, ServerSpan) and figures.e2e_ns == 1_000_000_000


@pytest.mark.parametrize(
    "body",
    [b"\x0a\xff", b"\x0a\x05\x01", b"\x0b", b"\x00", b"\xff" * 12, b"\x0a\x02\x0f\x00"],
)
def test_malformed_protobuf_is_an_error(body: bytes) -> None:
    with pytest.raises(OtlpError):
        otlp.decode_protobuf(body)


def test_json_camel_case_with_int_values_as_strings() -> None:
    document = _json(
        [
            {"key": "gen_ai.request.id", "value": {"stringValue": "chatcmpl-j"}},
            {"key": "gen_ai.latency.time_in_queue", "value": {"doubleValue": 0.01}},
            {"key": "gen_ai.latency.e2e", "value": {"intValue": "2"}},
            {"key": "tokenbench.run_id", "value": {"stringValue": "run-1"}},
            {"key": "gen_ai.usage.prompt_tokens", "value": {"intValue": "-12"}},
        ]
    )
    (raw,) = otlp.decode_json(document)
    assert raw.trace_id == "5b8efff798038103d269b633813fc60c"
    assert raw.attributes["gen_ai.usage.prompt_tokens"] == -12
    figures = otlp.server_span(raw)
    assert isinstance(figures, ServerSpan)
    assert figures.run_id == "run-1" and figures.provider == "vllm-a"
    assert (figures.queue_ns, figures.e2e_ns) == (10_000_000, 2_000_000_000)


def test_json_of_the_wrong_shape_is_an_error() -> None:
    with pytest.raises(OtlpError):
        otlp.decode_json([])
    with pytest.raises(OtlpError):
        otlp.decode_json({"resourceSpans": {"not": "a list"}})


def test_provider_attribute_wins_over_service_name() -> None:
    raw = RawSpan(
        attributes={otlp.REQUEST_ID: "r", otlp.E2E: 0.1, otlp.PROVIDER: "mine"},
        resource={otlp.SERVICE_NAME: "vllm"},
    )
    figures = otlp.server_span(raw)
    assert isinstance(figures, ServerSpan) and figures.provider == "mine"


@pytest.mark.parametrize(
    ("attributes", "reason"),
    [
        ({otlp.E2E: 1.0}, "no request id"),
        ({otlp.REQUEST_ID: "r" * 300, otlp.E2E: 1.0}, "no request id"),
        ({otlp.REQUEST_ID: "r"}, "no timings"),
        ({otlp.REQUEST_ID: "r", otlp.TIME_IN_QUEUE: -0.5}, "out of range"),
        ({otlp.REQUEST_ID: "r", otlp.TIME_IN_QUEUE: 1e300}, "out of range"),
        ({otlp.REQUEST_ID: "r", otlp.TIME_IN_QUEUE: float("nan")}, "out of range"),
        ({otlp.REQUEST_ID: "r", otlp.TIME_IN_QUEUE: "0.5"}, "not a number"),
        ({otlp.REQUEST_ID: "r", otlp.TIME_IN_QUEUE: True}, "not a number"),
        ({otlp.REQUEST_ID: "r", otlp.TIME_IN_QUEUE: otlp.INVALID}, "not a number"),
    ],
)
def test_hostile_spans_are_dropped_with_a_reason(
    attributes: dict[str, object], reason: str
) -> None:
    answer = otlp.server_span(RawSpan(attributes=attributes, resource={"service.name": "p"}))
    assert isinstance(answer, str) and reason in answer


def test_a_span_without_provider_is_dropped() -> None:
    answer = otlp.server_span(RawSpan(attributes={otlp.REQUEST_ID: "r", otlp.E2E: 1.0}))
    assert answer == "no provider"


def test_export_response_says_what_was_rejected() -> None:
    assert otlp.export_response(0, "") == (b"", {})
    proto, document = otlp.export_response(3, "3 no timings")
    assert document == {"partialSuccess": {"rejectedSpans": "3", "errorMessage": "3 no timings"}}
    assert proto.startswith(b"\x0a") and b"3 no timings" in proto
