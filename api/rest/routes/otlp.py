"""``POST /v1/otlp/v1/traces``: an OTLP/HTTP trace receiver for servers' per-request
timings (docs/traces.md).

A server (vLLM's ``--otlp-traces-endpoint``) exports its request spans here with
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` set to this URL and a submitter's (or admin's)
bearer token in ``OTEL_EXPORTER_OTLP_TRACES_HEADERS``. Protobuf and JSON bodies, gzip or
not, at most ``MAX_OTLP_BODY_BYTES`` (413 past it, before decoding). Each span is
stored for the live runs of the sender's team that name its provider; spans for no
such run are refused, malformed or hostile ones (and those past ``MAX_OTLP_SPANS``)
dropped; both are counted in the answer's ``partial_success`` and in
``server_span_receipts``. A span never changes a record.
"""

from __future__ import annotations

import datetime as dt
import zlib
from collections import Counter

import orjson
from fastapi import APIRouter, Request, Response

from analytics.store.server_spans import Receipt, WritableRuns, record_receipt, store_spans
from api.rest.deps import HeavyDep, SubmitterDep, WriterDep
from scenarios.errors import BadInput
from scenarios.limits import MAX_OTLP_BODY_BYTES, MAX_OTLP_SPANS
from scenarios.wire.otlp import (
    OtlpError,
    RawSpan,
    ServerSpan,
    decode_json,
    decode_protobuf,
    export_response,
    server_span,
)

PREFIX = "/v1/otlp"
TRACES_PATH = f"{PREFIX}/v1/traces"
PROTOBUF = "application/x-protobuf"
JSON = "application/json"

router = APIRouter(prefix=PREFIX, tags=["otlp"])


class UnsupportedMedia(BadInput):
    """A body in neither OTLP encoding (415)."""

    http_status = 415


class NotOtlp(BadInput):
    """A body that does not decode as an OTLP trace export (400, as OTLP/HTTP says: an
    exporter does not retry it)."""

    http_status = 400


class BodyTooLarge(BadInput):
    """A gzip body that inflates past the bound (413)."""

    http_status = 413


@router.post("/v1/traces", status_code=200)
async def export_traces(
    request: Request, caller: SubmitterDep, writer: WriterDep, heavy: HeavyDep
) -> Response:
    """Receive an OTLP trace export. The answer is an ``ExportTraceServiceResponse`` in
    the request's encoding; ``partial_success.rejected_spans`` counts the spans not
    stored (refused or dropped) and its message says why."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media not in (PROTOBUF, JSON):
        raise UnsupportedMedia(f"content-type must be {PROTOBUF} or {JSON}, not {media!r}")
    body = await request.body()
    if request.headers.get("content-encoding", "").strip().lower() == "gzip":
        body = _gunzip(body)
    try:
        # Off the event loop, a bounded number at once (503 with Retry-After when busy,
        # which an OTLP exporter retries).
        raws = await heavy.run("an OTLP export", _decode, media, body)
    except OtlpError as exc:
        raise NotOtlp(f"body: not an OTLP trace export ({exc})") from None
    received_at = dt.datetime.now(dt.UTC)
    reasons: Counter[str] = Counter()
    if len(raws) > MAX_OTLP_SPANS:
        reasons[f"more than {MAX_OTLP_SPANS} spans"] = len(raws) - MAX_OTLP_SPANS
    team = None if caller.is_admin else caller.team
    # One query for the request, whatever it names: a span per provider name must not
    # become a query per span on the event loop.
    writable = WritableRuns(writer, team, received_at)
    rows: list[tuple[str, ServerSpan]] = []
    stored = refused = 0
    for raw in raws[:MAX_OTLP_SPANS]:
        span = server_span(raw)
        if isinstance(span, str):
            reasons[span] += 1
            continue
        runs = writable.of(span.provider, span.run_id)
        if not runs:
            refused += 1
            continue
        stored += 1
        rows.extend((run_id, span) for run_id in runs)
    store_spans(writer, rows, received_at)
    dropped = sum(reasons.values())
    receipt = Receipt(
        caller.team, caller.token_id, "protobuf" if media == PROTOBUF else "json",
        len(raws), stored, refused, dropped,
    )  # fmt: skip
    record_receipt(writer, receipt, received_at)
    return _answer(media, receipt, reasons)


def _decode(media: str, body: bytes) -> list[RawSpan]:
    if media == PROTOBUF:
        return decode_protobuf(body)
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise OtlpError(f"JSON: {exc}") from None
    return decode_json(document)


def _gunzip(body: bytes) -> bytes:
    """The body inflated, at most MAX_OTLP_BODY_BYTES of it (a gzip bomb is refused)."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(body, MAX_OTLP_BODY_BYTES + 1)
    except zlib.error:
        raise NotOtlp("body: not gzip") from None
    if len(out) > MAX_OTLP_BODY_BYTES or inflater.unconsumed_tail:
        raise BodyTooLarge(f"inflated body larger than {MAX_OTLP_BODY_BYTES} bytes")
    return out


def _answer(media: str, receipt: Receipt, reasons: Counter[str]) -> Response:
    rejected = receipt.refused + receipt.dropped
    parts = [f"{count} {reason}" for reason, count in reasons.most_common(5)]
    if receipt.refused:
        parts.insert(0, f"{receipt.refused} for no run of this team naming their provider")
    proto, json_body = export_response(rejected, "; ".join(parts))
    if media == PROTOBUF:
        return Response(proto, media_type=PROTOBUF)
    return Response(orjson.dumps(json_body), media_type=JSON)
