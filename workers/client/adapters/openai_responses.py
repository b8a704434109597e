"""``kind: openai-responses``: OpenAI's Responses API, ``POST {base_url}/responses`` with
``stream: true``.

Wire format (OpenAI's Responses streaming events): SSE events whose data carries its
``type``: ``response.created`` (the response with its ``id``), ``response.output_text.delta``
(answer text), ``response.reasoning_summary_text.delta`` and ``response.reasoning_text.delta``
(reasoning: counts for TTFT, not the first output token), ``response.refusal.delta``
(output), ``response.output_item.added`` with a ``function_call`` item (a tool call, named)
then ``response.function_call_arguments.delta`` (pieces of its arguments), and one
terminal event: ``response.completed`` (its ``usage``: ``input_tokens`` with
``input_tokens_details.cached_tokens``, ``output_tokens`` with
``output_tokens_details.reasoning_tokens``), ``response.incomplete``
(``incomplete_details.reason``: ``max_output_tokens`` is ``length``) or ``response.failed``
(``response.error``); an ``error`` event may come instead. There is no ``[DONE]``. The key
is a bearer token; the ``x-request-id`` header and the response id are recorded.
"""

from __future__ import annotations

from typing import Any

import orjson

from scenarios.providers.base import join_url
from scenarios.providers.kinds import OpenAIResponsesProvider
from workers.client.adapters.base import AdapterContext, read_secret, register
from workers.client.adapters.post_stream import PostStreamAdapter
from workers.client.finish import RESPONSES_INCOMPLETE_REASONS, finish_reason
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

# The HTTP status an error code of a failed response stands for.
_ERROR_STATUS = {
    "rate_limit_exceeded": 429,
    "insufficient_quota": 429,
    "server_error": 500,
    "invalid_prompt": 400,
    "invalid_request_error": 400,
    "context_length_exceeded": 400,
}
_REASONING = ("response.reasoning_summary_text.delta", "response.reasoning_text.delta")
_OUTPUT = ("response.output_text.delta", "response.refusal.delta")


class ResponsesParser:
    """Interprets a Responses API SSE stream."""

    __slots__ = ("decoder", "stream")

    def __init__(self, result: RequestResult) -> None:
        self.stream = NativeStream(result)
        self.decoder = NamedSSEDecoder()

    def feed(self, chunk: bytes, stamp: int) -> None:
        """Interpret the events completed by ``chunk``."""
        for event in self.decoder.feed(chunk):
            self._on_event(event, stamp)

    def _on_event(self, event: SSEEvent, stamp: int) -> None:
        if event.data == b"[DONE]" or not event.data.strip():
            return  # not sent by OpenAI; some compatible servers add it
        message = json_object(event.data)
        kind = message.get("type", event.event)
        stream = self.stream
        if kind in _OUTPUT:
            stream.text(stamp, message.get("delta"), output=True)
        elif kind in _REASONING:
            stream.text(stamp, message.get("delta"), output=False)
        elif kind == "response.function_call_arguments.delta":
            stream.tool_call(stamp, _call_key(message), message.get("delta"))
        elif kind == "response.output_item.added":
            item = message.get("item")
            if isinstance(item, dict) and item.get("type") == "function_call":
                stream.tool_call(stamp, _call_key(message))
        elif kind == "response.created":
            response = message.get("response")
            if isinstance(response, dict):
                stream.response_id(response.get("id"))
        elif kind in ("response.completed", "response.incomplete"):
            self._on_end(kind, message.get("response"))
        elif kind == "response.failed":
            response = message.get("response")
            error = response.get("error") if isinstance(response, dict) else None
            raise _failure(error if isinstance(error, dict) else {})
        elif kind == "error":
            error = message.get("error")
            raise _failure(error if isinstance(error, dict) else message)

    def _on_end(self, kind: str, response: Any) -> None:
        stream = self.stream
        stream.ended = True
        if not isinstance(response, dict):
            return
        stream.response_id(response.get("id"))
        if kind == "response.completed":
            stream.finished = "tool_calls" if stream.tool_keys else "stop"
        else:
            details = response.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, dict) else None
            stream.finished = finish_reason(reason, RESPONSES_INCOMPLETE_REASONS) or "other"
        usage = response.get("usage")
        if not isinstance(usage, dict):
            return
        prompt, completion = counted(usage.get("input_tokens")), counted(usage.get("output_tokens"))
        if prompt is not None and completion is not None:
            stream.prompt, stream.completion = prompt, completion
        details = usage.get("input_tokens_details")
        if isinstance(details, dict):
            stream.cache(counted(details.get("cached_tokens")))
        details = usage.get("output_tokens_details")
        if isinstance(details, dict) and counted(details.get("reasoning_tokens")) is not None:
            stream.result.reasoning_tokens = details["reasoning_tokens"]

    def finish(self, stamp: int) -> None:
        """Interpret an unterminated last event, check the answer finished, settle counts."""
        for event in self.decoder.flush():
            self._on_event(event, stamp)
        self.stream.finish("response.completed or response.incomplete event")


def _call_key(message: dict[str, Any]) -> object:
    """A function call's key: its output item's id, else its place in the output."""
    item = message.get("item")
    item_id = item.get("id") if isinstance(item, dict) else message.get("item_id")
    return item_id if isinstance(item_id, str) else message.get("output_index")


def _failure(error: dict[str, Any]) -> Exception:
    code = error.get("code")
    return event_failure(_ERROR_STATUS.get(str(code), 500), code, error.get("message"))


def responses_tool_choice(tool_choice: str | dict[str, Any]) -> str | dict[str, Any]:
    """An OpenAI chat ``tool_choice`` in the Responses API's shape."""
    name = forced_tool(tool_choice)
    if name is not None:
        return {"type": "function", "name": name}
    return tool_choice if isinstance(tool_choice, str) else "auto"


def responses_body(
    model: str, request: PlannedRequest, extra_body: dict[str, Any] | None = None
) -> bytes:
    """A streaming Responses request of the planned output length (``max_output_tokens``);
    the conversation as ``input`` messages, system text as ``instructions``; not stored."""
    system, turns = conversation(request)
    body: dict[str, Any] = {
        "model": model,
        "input": [{"role": role, "content": text} for role, text in turns],
        "max_output_tokens": request.output_tokens,
        "stream": True,
        "store": False,
    }
    if system is not None:
        body["instructions"] = system
    if request.tools is not None:
        body["tools"] = [
            {"type": "function", **function} for function in function_tools(request.tools.tools)
        ]
        body["tool_choice"] = responses_tool_choice(request.tools.tool_choice)
    if extra_body:
        body.update(extra_body)
    return orjson.dumps(body)


@register("openai-responses")
async def openai_responses_adapter(
    provider: OpenAIResponsesProvider, context: AdapterContext
) -> PostStreamAdapter:
    """Adapter of the Responses API at ``base_url``."""
    key = read_secret(provider.api_key_env, provider.base_url, provider.name, context)
    model, extra = provider.model, provider.extra_body
    return PostStreamAdapter(
        url=join_url(provider.base_url, "responses"),
        headers=json_headers(key),
        limits=Limits.of(provider, key),
        retry=provider.retry,
        body=lambda request: responses_body(model, request, extra),
        parser=ResponsesParser,
        model=model,
    )
