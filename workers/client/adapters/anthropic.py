"""``kind: anthropic``: the Messages API, ``POST {base_url}/v1/messages`` with ``stream: true``.

Wire format (Anthropic's streaming docs): named SSE events whose data repeats the name
in ``type``: ``message_start`` (the message with its ``id`` and first ``usage``), per content
block ``content_block_start`` / ``content_block_delta`` / ``content_block_stop``, then
``message_delta`` (``delta.stop_reason`` and cumulative ``usage``) and ``message_stop``;
``ping`` any time; ``error`` (``{"type": "error", "error": {"type": "overloaded_error",
...}}``) instead of the rest. Deltas are ``text_delta`` (output), ``thinking_delta``
(reasoning: counts for TTFT, not for the first output token), ``input_json_delta`` (a
piece of a ``tool_use`` block's input: a tool-call delta), ``signature_delta`` and
``citations_delta`` (no tokens). Usage: ``input_tokens`` does not include the prompt
tokens read from or written to the prompt cache (``cache_read_input_tokens``,
``cache_creation_input_tokens``), so the recorded prompt is their sum, as the other
dialects count it; ``output_tokens`` includes thinking, which usage does not report apart
(``reasoning_tokens`` stays unknown). The key goes in ``x-api-key`` with the
``anthropic-version`` header; the ``request-id`` header and the message id are recorded.
"""

from __future__ import annotations

from typing import Any

import orjson

from scenarios.providers.base import join_url
from scenarios.providers.kinds import AnthropicProvider
from workers.client.adapters.base import AdapterContext, read_secret, register
from workers.client.adapters.post_stream import PostStreamAdapter
from workers.client.finish import ANTHROPIC_REASONS, finish_reason
from workers.client.native_stream import (
    NativeStream,
    conversation,
    event_failure,
    forced_tool,
    function_tools,
)
from workers.client.result import RequestResult
from workers.client.sse_events import NamedSSEDecoder, SSEEvent
from workers.client.streaming import Limits, counted, json_headers, json_object
from workers.prompts.plan import PlannedRequest

# The HTTP status each error type of the Messages API stands for (its errors page).
_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


class AnthropicParser:
    """Interprets a Messages API SSE stream."""

    __slots__ = ("decoder", "input", "stream")

    def __init__(self, result: RequestResult) -> None:
        self.stream = NativeStream(result)
        self.decoder = NamedSSEDecoder()
        # input_tokens and the two cache counts, latest seen (message_delta repeats them)
        self.input: dict[str, int] = {}

    def feed(self, chunk: bytes, stamp: int) -> None:
        """Interpret the events completed by ``chunk``."""
        for event in self.decoder.feed(chunk):
            self._on_event(event, stamp)

    def _on_event(self, event: SSEEvent, stamp: int) -> None:
        if not event.data.strip():
            return
        message = json_object(event.data)
        kind = message.get("type", event.event)
        stream = self.stream
        if kind == "content_block_delta":
            self._on_delta(message, stamp)
        elif kind == "content_block_start":
            self._on_block_start(message, stamp)
        elif kind == "message_start":
            start = message.get("message")
            if isinstance(start, dict):
                stream.response_id(start.get("id"))
                self._on_usage(start.get("usage"))
        elif kind == "message_delta":
            delta = message.get("delta")
            if isinstance(delta, dict):
                reason = finish_reason(delta.get("stop_reason"), ANTHROPIC_REASONS)
                if reason is not None:
                    stream.finished = reason
            self._on_usage(message.get("usage"))
        elif kind == "message_stop":
            stream.ended = True
        elif kind == "error":
            error = message.get("error")
            error = error if isinstance(error, dict) else {}
            error_type = error.get("type")
            status = _ERROR_STATUS.get(str(error_type), 500)
            raise event_failure(status, error_type, error.get("message"))

    def _on_delta(self, message: dict[str, Any], stamp: int) -> None:
        delta = message.get("delta")
        if not isinstance(delta, dict):
            return
        kind = delta.get("type")
        if kind == "text_delta":
            self.stream.text(stamp, delta.get("text"), output=True)
        elif kind == "thinking_delta":
            self.stream.text(stamp, delta.get("thinking"), output=False)
        elif kind == "input_json_delta":
            self.stream.tool_call(stamp, message.get("index"), delta.get("partial_json"))

    def _on_block_start(self, message: dict[str, Any], stamp: int) -> None:
        block = message.get("content_block")
        if not isinstance(block, dict):
            return
        kind = block.get("type")
        if kind in ("tool_use", "server_tool_use"):
            self.stream.tool_call(stamp, message.get("index"))  # the call's name is here
        elif kind == "text":
            self.stream.text(stamp, block.get("text"), output=True)
        elif kind == "thinking":
            self.stream.text(stamp, block.get("thinking"), output=False)

    def _on_usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        for key in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
            value = counted(usage.get(key))
            if value is not None:
                self.input[key] = value
        output = counted(usage.get("output_tokens"))
        if output is not None:
            self.stream.completion = output  # cumulative: the last one is the answer's
        if "input_tokens" in self.input:
            self.stream.prompt = sum(self.input.values())
        self.stream.cache(
            self.input.get("cache_read_input_tokens"), self.input.get("cache_creation_input_tokens")
        )

    def finish(self, stamp: int) -> None:
        """Interpret an unterminated last event, check the answer finished, settle counts."""
        for event in self.decoder.flush():
            self._on_event(event, stamp)
        self.stream.finish("message_stop")


def anthropic_tool_choice(tool_choice: str | dict[str, Any]) -> dict[str, Any]:
    """An OpenAI-style ``tool_choice`` in the Messages API's shape."""
    name = forced_tool(tool_choice)
    if name is not None:
        return {"type": "tool", "name": name}
    return {"type": {"required": "any", "none": "none"}.get(str(tool_choice), "auto")}


def messages_body(
    model: str, request: PlannedRequest, extra_body: dict[str, Any] | None = None
) -> bytes:
    """A streaming Messages request of the planned output length (``max_tokens``); the
    conversation's system text goes in ``system``; ``extra_body`` (e.g. ``thinking``) last."""
    system, turns = conversation(request)
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": request.output_tokens,
        "messages": [{"role": role, "content": text} for role, text in turns],
        "stream": True,
    }
    if system is not None:
        body["system"] = system
    if request.tools is not None:
        body["tools"] = [
            {"name": f["name"], "description": f["description"], "input_schema": f["parameters"]}
            for f in function_tools(request.tools.tools)
        ]
        body["tool_choice"] = anthropic_tool_choice(request.tools.tool_choice)
    if extra_body:
        body.update(extra_body)
    return orjson.dumps(body)


def anthropic_headers(key: str | None, version: str) -> dict[str, str]:
    """JSON headers with ``anthropic-version`` and, when a key is set, ``x-api-key``."""
    headers = {**json_headers(None), "anthropic-version": version}
    if key:
        headers["x-api-key"] = key
    return headers


@register("anthropic")
async def anthropic_adapter(
    provider: AnthropicProvider, context: AdapterContext
) -> PostStreamAdapter:
    """Adapter of the Messages API at ``base_url`` (Anthropic's or another engine's)."""
    key = read_secret(provider.api_key_env, provider.base_url, provider.name, context)
    model, extra = provider.model, provider.extra_body
    return PostStreamAdapter(
        url=join_url(provider.base_url, "v1/messages"),
        headers=anthropic_headers(key, provider.anthropic_version),
        limits=Limits.of(provider, key),
        retry=provider.retry,
        body=lambda request: messages_body(model, request, extra),
        parser=AnthropicParser,
        model=model,
    )
