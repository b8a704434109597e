"""What a response says about itself: its own id, the request id the server sent in a
header, and (TGI) the per-request timing headers.

Server-side timings (a trace, a log line) are joined to the client's record on these ids
(docs/metrics.md, "Response and request ids"). Everything here reads untrusted input: a
value that is not a short printable string or a plain number is not an id or a timing,
and becomes None (unknown), never an exception.
"""

from __future__ import annotations

from collections.abc import Mapping

from workers.client.result import RequestResult

# Where each server puts the id of a request, first match wins: OpenAI, vLLM
# (--enable-request-id-headers), Azure OpenAI and most gateways send x-request-id;
# Anthropic request-id; Azure's API management apim-request-id; Azure services
# x-ms-request-id; AWS (Bedrock) x-amzn-requestid. Header names are case-insensitive.
REQUEST_ID_HEADERS = (
    "x-request-id",
    "request-id",
    "apim-request-id",
    "x-ms-request-id",
    "x-amzn-requestid",
)
# An id joins records: it is never a payload. Longer values are cut (the record keeps
# at most this many characters too).
MAX_ID_CHARS = 200

# TGI's timing headers, whole milliseconds (the router writes Duration::as_millis()),
# sent with the answer of the non-streamed /generate; x-queue-time is the wait between
# validation and the start of inference, the server queue of docs/metrics.md.
TGI_QUEUE_HEADER = "x-queue-time"
# A timing longer than a day is not a timing of one request.
_MAX_MS = 86_400_000
_MAX_DIGITS = len(str(_MAX_MS))


def clean_id(value: object) -> str | None:
    """``value`` as an id: a non-empty printable string, cut to MAX_ID_CHARS; else None."""
    if not isinstance(value, str):
        return None
    value = value[:MAX_ID_CHARS].strip()
    if not value or not value.isprintable():
        return None
    return value


def server_request_id(headers: Mapping[str, str]) -> str | None:
    """The request id the server sent, from the first of REQUEST_ID_HEADERS present."""
    for name in REQUEST_ID_HEADERS:
        value = headers.get(name)
        if value is not None:
            return clean_id(value)
    return None


def note_response(result: RequestResult, headers: Mapping[str, str]) -> None:
    """Record the server's request id header (every response, errors too)."""
    if result.server_request_id is None:
        result.server_request_id = server_request_id(headers)


def note_response_id(result: RequestResult, value: object) -> None:
    """Record the response's own id (a stream event's ``id``), the first one seen."""
    if result.response_id is None:
        result.response_id = clean_id(value)


def header_ms(value: str | None) -> int | None:
    """A whole number of milliseconds as ns; None for anything else (missing, empty,
    signed, fractional, non-ASCII digits, longer than a day)."""
    if value is None:
        return None
    value = value.strip()
    if not value or len(value) > _MAX_DIGITS or not (value.isascii() and value.isdigit()):
        return None
    ms = int(value)
    return ms * 1_000_000 if ms <= _MAX_MS else None


def note_tgi_timings(result: RequestResult, headers: Mapping[str, str]) -> None:
    """TGI's per-request timing headers, where the answer has them: the queue time.
    (TGI's other timings, validation and inference, have no column: inference is
    prefill and decode together, so it is not the server's time to first token.)"""
    queue = header_ms(headers.get(TGI_QUEUE_HEADER))
    if queue is not None:
        result.server_queue_ns = queue
        result.server_timing_source = "tgi"
