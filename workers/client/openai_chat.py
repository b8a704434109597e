"""Measured streaming request to an OpenAI-compatible ``/v1/chat/completions`` endpoint."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import httpx
import orjson

from workers.client.chat_stream import ChatStream
from workers.client.errors import classify_exception, http_failure
from workers.client.result import RequestResult
from workers.client.sse import SSEDecoder

MAX_ERROR_BODY = 4096


@dataclass(frozen=True, slots=True)
class ChatEndpoint:
    """Where and how to send chat requests. ``api_key`` is resolved in the worker's memory
    from an environment variable and never leaves it."""

    url: str
    model: str
    api_key: str | None
    timeout_s: float
    stall_timeout_s: float
    connect_timeout_s: float

    @property
    def secrets(self) -> tuple[str, ...]:
        """Values that must never appear in a message."""
        return (self.api_key,) if self.api_key else ()


def chat_body(model: str, prompt: str, max_tokens: int) -> bytes:
    """Request body asking for a stream with usage, answer bounded by ``max_tokens``."""
    return orjson.dumps(
        {
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )


async def measure_chat(
    client: httpx.AsyncClient,
    endpoint: ChatEndpoint,
    prompt: str,
    max_tokens: int,
    planned_prompt_tokens: int,
    intended_start: int,
) -> RequestResult:
    """Send one streaming chat request and return its stamps; never raises for the
    request's own failures (they are classified into ``result.failure``)."""
    result = RequestResult(intended_start=intended_start)
    headers = {"content-type": "application/json", "accept": "text/event-stream"}
    if endpoint.api_key:
        headers["authorization"] = f"Bearer {endpoint.api_key}"
    timeout = httpx.Timeout(
        connect=endpoint.connect_timeout_s, read=endpoint.stall_timeout_s, write=30.0, pool=None
    )
    body = chat_body(endpoint.model, prompt, max_tokens)
    stream = ChatStream(result)
    decoder = SSEDecoder()
    now = time.perf_counter_ns
    try:
        async with asyncio.timeout(endpoint.timeout_s):
            result.sent = now()
            async with client.stream(
                "POST", endpoint.url, content=body, headers=headers, timeout=timeout
            ) as response:
                if response.status_code != 200:
                    error_body = await _bounded_body(response)
                    result.end = now()
                    result.failure = http_failure(
                        response.status_code, error_body, endpoint.secrets
                    )
                    return result
                async for chunk in response.aiter_raw():
                    stamp = now()  # before any decoding (DOMAIN §1)
                    if result.first_byte is None:
                        result.first_byte = stamp
                    for payload in decoder.feed(chunk):
                        stream.on_payload(payload, stamp)
                result.end = now()
                for payload in decoder.flush():
                    stream.on_payload(payload, result.end)
                stream.finish(planned_prompt_tokens)
    except BaseException as exc:
        if result.end is None:
            result.end = now()
        if result.sent == 0:
            result.sent = result.end
        # A cancelled request is recorded as such rather than lost; the executor stops
        # its virtual users by a flag, so swallowing the cancellation here is safe.
        result.failure = classify_exception(exc, endpoint.secrets)
    return result


async def _bounded_body(response: httpx.Response) -> bytes:
    body = b""
    async for chunk in response.aiter_raw():
        body += chunk
        if len(body) >= MAX_ERROR_BODY:
            break
    return body[:MAX_ERROR_BODY]
