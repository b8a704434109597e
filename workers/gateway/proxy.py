"""Forwarding one chat request to the primary, measuring it on the way (pure async code).

The response body is passed to the client chunk by chunk as it arrives; each chunk is
stamped with ``perf_counter_ns`` before anything decodes it, then fed to the same
chat-stream interpreter the workers use (``workers.client.chat_stream``), so the
primary's TTFT, ITL, E2E and usage follow docs/metrics.md exactly as a benchmark's would.
``intended_start`` is when the gateway had the whole request, ``sent`` when it began
sending upstream: their difference (the record's schedule lag) is the gateway's own
time before forwarding.

A client's non-streaming request is forwarded as such: it yields first byte, E2E and
usage, but no token events, so its TTFT and ITL stay empty (a gateway cannot see tokens
the server does not stream).

Only the upstream's ``content-type`` and rate-limit headers are passed back. The
client's ``Authorization`` header is forwarded to the primary only when the primary has
no ``api_key_env`` of its own, and is never stored, logged or sent to a shadow.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import httpx
import orjson

from workers.client.adapters.openai_chat import ChatParser
from workers.client.errors import ErrorClass, RequestFailure, classify_exception
from workers.client.result import RequestResult
from workers.client.retry import status_failure
from workers.client.streaming import Limits
from workers.client.transport import arrival_of

now = time.perf_counter_ns

# Upstream headers worth passing back: what the body is, and what rate limiting says.
_PASSED_HEADERS = re.compile(r"^(content-type|retry-after(-ms)?|x-ratelimit-.*|x-request-id)$")
_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_EMPTY_CHOICES = re.compile(rb'"choices"\s*:\s*\[\s*\]')
MAX_NONSTREAM_PARSE = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Upstream:
    """Where and how the primary is reached."""

    chat_url: str
    models_url: str
    key: str | None
    limits: Limits

    def headers(self, client_auth: str | None, accept: str) -> dict[str, str]:
        """Request headers: JSON, no compression (bytes pass through), the right auth."""
        headers = {
            "content-type": "application/json",
            "accept": accept,
            "accept-encoding": "identity",
        }
        auth = f"Bearer {self.key}" if self.key else client_auth
        if auth:
            headers["authorization"] = auth
        return headers


def passed_headers(response: httpx.Response) -> dict[str, str]:
    """The upstream headers the client gets back."""
    return {k: v for k, v in response.headers.items() if _PASSED_HEADERS.match(k.lower())}


class UsageFilter:
    """Removes the usage-only SSE event that the gateway asked for on the client's behalf.

    Only complete events are released (an SSE client acts on nothing before an event's
    blank line anyway); every other event passes byte for byte.
    """

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, chunk: bytes) -> bytes:
        """The complete events of ``chunk`` (with what was pending), filtered."""
        data = self._pending + chunk
        ends = list(_EVENT_END.finditer(data))
        if not ends:
            self._pending = data
            return b""
        cut = ends[-1].end()
        complete, self._pending = data[:cut], data[cut:]
        if not _EMPTY_CHOICES.search(complete):
            return complete
        out, start = [], 0
        for end in _EVENT_END.finditer(complete):
            event = complete[start : end.end()]
            if not _is_usage_only(event):
                out.append(event)
            start = end.end()
        return b"".join(out)

    def flush(self) -> bytes:
        """Whatever was left unterminated at the end of the stream."""
        rest, self._pending = self._pending, b""
        return rest


def _is_usage_only(event: bytes) -> bool:
    for line in event.splitlines():
        if line.startswith(b"data:"):
            try:
                message = orjson.loads(line[5:].strip())
            except orjson.JSONDecodeError:
                return False
            return (
                isinstance(message, dict)
                and message.get("choices") == []
                and isinstance(message.get("usage"), dict)
            )
    return False


OnDone = Callable[[RequestResult], None]


async def relay_stream(
    response: httpx.Response,
    result: RequestResult,
    planned_prompt_tokens: int,
    usage_filter: UsageFilter | None,
    on_done: OnDone,
) -> AsyncIterator[bytes]:
    """Pass an SSE body through as it arrives, recording its stamps into ``result``."""
    parser = ChatParser(result)
    parsing = True
    arrival = arrival_of(response)
    try:
        async for chunk in response.aiter_raw():
            # Before any decoding (docs/metrics.md); with the default transport, the bytes'
            # arrival (decision 22) rather than this coroutine's turn.
            stamp = now() if arrival is None else arrival.last
            if result.first_byte is None:
                result.first_byte = stamp
            if parsing:
                try:
                    parser.feed(chunk, stamp)
                except RequestFailure as failure:
                    # The stream reported an error: recorded, and still passed on as sent.
                    result.failure, parsing = failure, False
            out = chunk if usage_filter is None else usage_filter.feed(chunk)
            if out:
                yield out
        if usage_filter is not None and (rest := usage_filter.flush()):
            yield rest
        result.end = now()
        if parsing:
            try:
                parser.finish(result.end, planned_prompt_tokens)
            except RequestFailure as failure:
                result.failure = failure
    except BaseException as exc:
        _fail(result, exc)
        raise
    finally:
        await response.aclose()
        on_done(result)


async def relay_body(
    response: httpx.Response, result: RequestResult, on_done: OnDone
) -> AsyncIterator[bytes]:
    """Pass a non-streaming body through as it arrives; take usage from its JSON."""
    body = bytearray()
    arrival = arrival_of(response)
    try:
        async for chunk in response.aiter_raw():
            stamp = now() if arrival is None else arrival.last
            if result.first_byte is None:
                result.first_byte = stamp
            if len(body) < MAX_NONSTREAM_PARSE:
                body += chunk
            yield chunk
        result.end = now()
        _usage_of(bytes(body), result)
    except BaseException as exc:
        _fail(result, exc)
        raise
    finally:
        await response.aclose()
        on_done(result)


def _usage_of(body: bytes, result: RequestResult) -> None:
    try:
        usage = orjson.loads(body).get("usage")
    except (orjson.JSONDecodeError, AttributeError):
        result.failure = RequestFailure(ErrorClass.PROTOCOL, "response is not a JSON object")
        return
    if isinstance(usage, dict):
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if isinstance(prompt, int) and isinstance(completion, int):
            result.prompt_tokens, result.completion_tokens = prompt, completion
            result.token_count_source = "usage"


def _fail(result: RequestResult, exc: BaseException) -> None:
    if result.end is None:
        result.end = now()
    if result.failure is None:
        if isinstance(exc, GeneratorExit | asyncio.CancelledError):
            result.failure = RequestFailure(ErrorClass.CANCELLED, "client went away mid-response")
        else:
            result.failure = classify_exception(exc)


async def error_answer(
    response: httpx.Response, result: RequestResult, secrets: tuple[str, ...]
) -> bytes:
    """Read an upstream error answer whole (they are small) and record its class."""
    try:
        body = await response.aread()
    finally:
        await response.aclose()
    result.end = now()
    result.failure = status_failure(response.status_code, response.headers, body, secrets)
    return body
