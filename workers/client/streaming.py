"""The measured streaming request every adapter shares: stamps, deadlines, classification.

An adapter supplies how to build its request (``prepare``, run after ``sent`` is stamped,
so signing or a preliminary call is inside the measured time, as in decision 2) and a
``StreamParser`` for its wire format. This module stamps the bytes the moment they
arrive, before the parser decodes anything (docs/metrics.md): with the default transport that
is the kernel's receive time of the bytes (``arrival_of``, decision 22), so time the chunk
then waits for this coroutine's turn is not counted; other transports are stamped here,
when the chunk reaches this coroutine. It applies the provider's deadlines
(whole request, silence between bytes, connect) and turns every failure into a
classified RequestFailure; it never raises for a request's own failure.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
import orjson

from scenarios.providers.base import ProviderBase, RetryPolicy
from workers.client.errors import (
    ProtocolFailure,
    RequestFailure,
    class_of_status,
    classify_exception,
    redact,
)
from workers.client.result import AnswerText, RequestResult
from workers.client.retry import measure_with_retry, status_failure
from workers.client.server_ids import note_response
from workers.client.transport import PHASES_EXTENSION, arrival_of

MAX_ERROR_BODY = 4096


@dataclass(frozen=True, slots=True)
class Limits:
    """Deadlines of one provider's requests and the secrets its messages must not show."""

    timeout_s: float
    stall_timeout_s: float
    connect_timeout_s: float
    secrets: tuple[str, ...] = ()
    # Built once: every request of the provider passes the same one (a Timeout per
    # request was CPU spent per answer for nothing).
    _timeout: httpx.Timeout = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        timeout = httpx.Timeout(
            connect=self.connect_timeout_s, read=self.stall_timeout_s, write=30.0, pool=None
        )
        object.__setattr__(self, "_timeout", timeout)  # frozen: set once, here

    @classmethod
    def of(cls, provider: ProviderBase, *secrets: str | None) -> Limits:
        """The provider's deadlines; ``secrets`` are credential values to redact."""
        return cls(
            provider.timeout_s,
            provider.stall_timeout_s,
            provider.connect_timeout_s,
            tuple(secret for secret in secrets if secret),
        )

    def http_timeout(self) -> httpx.Timeout:
        """Per-phase httpx timeouts; ``read`` is the longest silence between bytes."""
        return self._timeout


@dataclass(frozen=True, slots=True)
class HttpCall:
    """The streaming HTTP request to send."""

    method: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    content: bytes | None = None


class StreamParser(Protocol):
    """Interprets one response body of a wire format, updating a RequestResult (the
    response's request id header is read by ``measure_stream`` for every dialect)."""

    def feed(self, chunk: bytes, stamp: int) -> None:
        """Account for ``chunk``, whose bytes arrived at ``stamp``; raise RequestFailure
        for an error the stream reports."""

    def finish(self, stamp: int) -> None:
        """The body ended at ``stamp``: check the answer finished (else raise
        IncompleteAnswer) and settle token counts."""


def own_size(body: bytes) -> bytes:
    """``body`` in an allocation of its own size. orjson (3.x) returns its bytes in a
    buffer of at least 4 KiB whatever their length, and a request's body lives as long
    as the request: at 10,000 streams that was ~40 MB of a worker (docs/load.md,
    "Memory"). The copy of a few hundred bytes costs well under a microsecond."""
    return bytes(memoryview(body))


Prepare = Callable[[httpx.AsyncClient], Awaitable[HttpCall]]
# A dialect's reading of the response head (e.g. TGI's timing headers), any status.
OnHeaders = Callable[[RequestResult, httpx.Headers], None]


async def measure_request(
    client: httpx.AsyncClient,
    request: HttpCall | Prepare,
    make_parser: Callable[[RequestResult], StreamParser],
    limits: Limits,
    retry: RetryPolicy | None,
    intended_start: int,
    answer_chars: int = 0,
    on_headers: OnHeaders | None = None,
) -> RequestResult:
    """One measured request of an adapter: a fixed call or a ``prepare`` step, its parser,
    and the provider's opt-in 429 retries; with ``answer_chars`` the parser keeps that
    much of the answer's text (parsers that can); ``on_headers`` reads the dialect's own
    response headers."""
    prepare = _fixed(request) if isinstance(request, HttpCall) else request

    async def attempt() -> RequestResult:
        result = RequestResult(intended_start=intended_start)
        if answer_chars > 0:
            result.answer = AnswerText(answer_chars)
        parser = make_parser(result)
        return await measure_stream(client, result, prepare, parser, limits, on_headers)

    return await measure_with_retry(retry, attempt)


async def measure_stream(
    client: httpx.AsyncClient,
    result: RequestResult,
    prepare: Prepare,
    parser: StreamParser,
    limits: Limits,
    on_headers: OnHeaders | None = None,
) -> RequestResult:
    """Send the request ``prepare`` builds and feed its body to ``parser``; the
    response's request id header and the connection phases are recorded too."""
    now = time.perf_counter_ns
    response: httpx.Response | None = None
    try:
        async with asyncio.timeout(limits.timeout_s):
            result.sent = now()
            call = await prepare(client)
            async with client.stream(
                call.method,
                call.url,
                content=call.content,
                headers=call.headers,
                timeout=limits.http_timeout(),
                extensions={PHASES_EXTENSION: result.phases},
            ) as response:
                note_response(result, response.headers)
                if on_headers is not None:
                    on_headers(result, response.headers)
                if response.status_code != 200:
                    body = await bounded_body(response)
                    result.end = now()
                    result.failure = status_failure(
                        response.status_code, response.headers, body, limits.secrets
                    )
                    return result
                arrival = arrival_of(response)
                if arrival is not None:
                    # The direct path: chunks with their arrival stamps straight from the
                    # transport, none of httpx's per-chunk wrapping (benchmarks/
                    # end_to_end_accuracy.py). The stamp comes before any decoding.
                    def consume(chunk: bytes, stamp: int) -> None:
                        if result.first_byte is None:
                            result.first_byte = stamp
                        parser.feed(chunk, stamp)

                    await arrival.read_into(consume)
                else:
                    async for chunk in response.aiter_raw():
                        # stamped before any decoding (docs/metrics.md), as read
                        stamp = now()
                        if result.first_byte is None:
                            result.first_byte = stamp
                        parser.feed(chunk, stamp)
                end = None if arrival is None else arrival.end
                result.end = now() if end is None else end
                parser.finish(result.end)
    except BaseException as exc:
        if result.end is None:
            result.end = now()
        if result.sent == 0:
            result.sent = result.end
        # Cancellation is recorded, not propagated: the executor stops virtual users by a
        # flag, and a request cut by it must still leave its row.
        result.failure = classify_exception(exc, limits.secrets)
    finally:
        if response is not None:
            release(response)
    return result


# What a closed response's body becomes: no reference back to the response.
_RELEASED = httpx.ByteStream(b"")


def release(response: httpx.Response) -> None:
    """Break the cycle a streamed httpx response makes with its body (the response holds
    the body stream, which holds the response), once the response is closed. Without it
    every request's response, request, headers and body buffers (about 22 objects) live
    until the cyclic collector finds them: at 1,000 streams its young collections then
    freed ~7,500 objects at a time in pauses of 85-95 ms, and each pause merges the token
    writes that land in it (docs/load.md). Released, reference counting frees them when
    the request ends."""
    if response.is_closed:
        response.stream = _RELEASED


def _fixed(call: HttpCall) -> Prepare:
    async def prepare(_: httpx.AsyncClient) -> HttpCall:
        return call

    return prepare


async def bounded_body(response: httpx.Response) -> bytes:
    """At most MAX_ERROR_BODY bytes of an (error) response body."""
    body = b""
    async for chunk in response.aiter_raw():
        body += chunk
        if len(body) >= MAX_ERROR_BODY:
            break
    return body[:MAX_ERROR_BODY]


async def read_json(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    limits: Limits,
    headers: dict[str, str],
    content: bytes | None = None,
    ok: tuple[int, ...] = (200, 201),
) -> dict[str, Any]:
    """A small non-streaming JSON call inside a measurement (e.g. creating a prediction);
    an error status raises the same classified failure a stream's would."""
    response = await client.request(
        method, url, content=content, headers=headers, timeout=limits.http_timeout()
    )
    release(response)  # read whole and closed: nothing needs its body stream again
    if response.status_code not in ok:
        raise status_failure(
            response.status_code,
            response.headers,
            response.content[:MAX_ERROR_BODY],
            limits.secrets,
        )
    return json_object(response.content)


def json_object(payload: bytes) -> dict[str, Any]:
    """Decode a JSON object or raise a protocol failure quoting (a redacted bit of) it."""
    try:
        message = orjson.loads(payload)
    except orjson.JSONDecodeError:
        raise ProtocolFailure(f"malformed JSON in stream: {preview(payload)}") from None
    if not isinstance(message, dict):
        raise ProtocolFailure(f"stream event is not a JSON object: {preview(payload)}")
    return message


def stream_error(error: Any) -> RequestFailure:
    """Failure of an ``error`` object sent mid-stream. The HTTP status was 200; a numeric
    code in the event says what kind of error it is."""
    code = error.get("code") if isinstance(error, dict) else None
    message = error.get("message", error) if isinstance(error, dict) else error
    status = code if isinstance(code, int) and 400 <= code <= 599 else None
    return RequestFailure(
        class_of_status(status or 500), redact(f"error event mid-stream: {message}"), status
    )


def preview(payload: bytes) -> str:
    """A short, redacted rendering of bytes for an error message."""
    return redact(payload[:120].decode("utf-8", errors="replace"))


def token_event(result: RequestResult, stamp: int, *, output: bool) -> None:
    """Record one token-bearing event; ``output`` False for reasoning text (it counts for
    ``first_token`` but not ``first_output_token``, docs/metrics.md)."""
    if result.first_token is None:
        result.first_token = stamp
    if output and result.first_output_token is None:
        result.first_output_token = stamp
    result.last_token = stamp
    result.token_stamps.append(stamp)


def settle_counts(
    result: RequestResult, prompt_tokens: int | None, completion_tokens: int | None, events: int
) -> None:
    """Token counts: each the server's when it gave it (``usage``); completions not
    reported are the counted token events (``events``, a lower bound when a chunk carries
    several tokens), and a prompt count not reported stays unknown (None): the planned
    length is never recorded as if the server had said it."""
    if prompt_tokens is not None:
        result.prompt_tokens = prompt_tokens
        result.prompt_count_source = "usage"
    if completion_tokens is not None:
        result.completion_tokens = completion_tokens
        result.token_count_source = "usage"
    else:
        result.completion_tokens = events
        result.token_count_source = "events"


def counted(value: object) -> int | None:
    """A token count from a server's usage: a non-negative int, else unknown (None)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def json_headers(
    bearer_key: str | None = None, accept: str = "text/event-stream"
) -> dict[str, str]:
    """Headers of a JSON request, with ``Authorization: Bearer`` when a key is set."""
    headers = {"content-type": "application/json", "accept": accept}
    if bearer_key:
        headers["authorization"] = f"Bearer {bearer_key}"
    return headers
