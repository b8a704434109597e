"""Error classes of docs/metrics.md ("Errors"), and the one place library errors are mapped to them.

    RequestFailure                  a request that did not complete
      error_class ∈ {http_4xx, http_429, http_5xx, timeout, connect, protocol, incomplete,
                     cancelled}
      ProtocolFailure               bytes that are not the dialect's stream
      IncompleteAnswer              a well-framed stream whose answer never said it ended

Transport errors (httpx, aiohttp beneath it, asyncio timeouts) are classified here and
nowhere else; messages are redacted and bounded (scenarios/security/redaction.py) before they leave
the worker, here and again when a record is built (workers/shard/rows.py).
"""

from __future__ import annotations

import asyncio
from enum import StrEnum

import httpx

from scenarios.security.redaction import MAX_MESSAGE_CHARS, redact

__all__ = [
    "MAX_MESSAGE_CHARS",
    "ErrorClass",
    "IncompleteAnswer",
    "ProtocolFailure",
    "RequestFailure",
    "class_of_status",
    "classify_exception",
    "http_failure",
    "redact",
]


class ErrorClass(StrEnum):
    """Why a request failed."""

    HTTP_4XX = "http_4xx"
    HTTP_429 = "http_429"
    HTTP_5XX = "http_5xx"
    TIMEOUT = "timeout"
    CONNECT = "connect"
    PROTOCOL = "protocol"
    INCOMPLETE = "incomplete"
    CANCELLED = "cancelled"


class RequestFailure(Exception):
    """A classified failure of one request."""

    def __init__(
        self, error_class: ErrorClass, message: str, http_status: int | None = None
    ) -> None:
        super().__init__(message)
        self.error_class = error_class
        self.message = message
        self.http_status = http_status


class ProtocolFailure(RequestFailure):
    """The server answered something that is not a valid stream (bad SSE/JSON, cut short)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorClass.PROTOCOL, message)


class IncompleteAnswer(RequestFailure):
    """The stream ended in good order (the body complete, ``[DONE]`` perhaps sent) but the
    answer carries no finish reason (docs/metrics.md, "Incomplete answers"): it may have
    been cut anywhere, so its latency and length are not those of a finished answer."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorClass.INCOMPLETE, message)


def class_of_status(status: int) -> ErrorClass:
    """Error class of a non-2xx HTTP status; a 3xx is a protocol error, since worker
    clients never follow redirects (a key must not follow one to another host)."""
    if 300 <= status < 400:
        return ErrorClass.PROTOCOL
    if status == 429:
        return ErrorClass.HTTP_429
    if status >= 500:
        return ErrorClass.HTTP_5XX
    return ErrorClass.HTTP_4XX


def http_failure(status: int, body: bytes, secrets: tuple[str, ...] = ()) -> RequestFailure:
    """Failure for an error status, with the server's message redacted."""
    text = body.decode("utf-8", errors="replace")
    if 300 <= status < 400:
        text = f"redirect not followed (worker clients never follow redirects) {text}"
    return RequestFailure(
        class_of_status(status), redact(f"HTTP {status}: {text}".rstrip(), secrets), status
    )


def classify_exception(exc: BaseException, secrets: tuple[str, ...] = ()) -> RequestFailure:
    """Map an exception raised while sending or streaming to a RequestFailure."""
    if isinstance(exc, RequestFailure):
        return exc
    if isinstance(exc, asyncio.CancelledError):
        return RequestFailure(ErrorClass.CANCELLED, "request cancelled")
    if isinstance(exc, httpx.ConnectTimeout | httpx.ConnectError):
        return RequestFailure(ErrorClass.CONNECT, redact(_describe(exc), secrets))
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return RequestFailure(ErrorClass.TIMEOUT, redact(_describe(exc) or "timed out", secrets))
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.DecodingError):
        return RequestFailure(ErrorClass.PROTOCOL, redact(_describe(exc), secrets))
    if isinstance(exc, httpx.NetworkError | OSError):
        return RequestFailure(ErrorClass.CONNECT, redact(_describe(exc), secrets))
    if isinstance(exc, KeyboardInterrupt | SystemExit):
        raise exc
    # Anything else (an HTTPError subclass not listed, a bug in a client library) is kept
    # as a protocol failure with its type named, so the record survives and stays visible.
    return RequestFailure(ErrorClass.PROTOCOL, redact(f"unexpected: {_describe(exc)}", secrets))


def _describe(exc: BaseException) -> str:
    text = str(exc)
    name = type(exc).__name__
    return f"{name}: {text}" if text else name
