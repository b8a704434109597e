"""The simulator's Messages API (``POST /v1/messages``, Anthropic's streaming events).

An answer is ``message_start`` (the message id, usage with ``input_tokens`` and, with a
prefix cache, ``cache_read_input_tokens``/``cache_creation_input_tokens``), a ``ping``,
one content block (``text`` with ``text_delta``s, or ``tool_use`` with
``input_json_delta``s: its start goes with the first delta, when the model has produced
its first token), ``content_block_stop``, ``message_delta`` (``stop_reason``:
``max_tokens``, as the simulator always fills the length, or ``tool_use``; cumulative
``output_tokens``) and ``message_stop``. Errors are ``{"type": "error", "error": {...}}``.
"""

from __future__ import annotations

from typing import Any

import orjson

from workers.simulator.dialects.serve import ArgumentPieces, Prompt, chat_tools, sse, text_of

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


class AnthropicDialect:
    """Request and answer shapes of the Messages API."""

    name = "anthropic"
    request_id_header: str | None = "request-id"

    def as_chat(self, body: dict[str, Any], query: str) -> dict[str, Any]:
        """The Messages request as a chat request."""
        messages: list[dict[str, Any]] = []
        system = body.get("system")
        if system:
            messages.append({"role": "system", "content": text_of(system)})
        for message in body["messages"]:
            messages.append({"role": str(message["role"]), "content": text_of(message["content"])})
        names = [str(tool["name"]) for tool in body.get("tools") or []]
        choice = body.get("tool_choice") or {"type": "auto"}
        kind = choice.get("type")
        chat_choice: Any = {"any": "required", "none": "none"}.get(str(kind), "auto")
        if kind == "tool":
            chat_choice = {"type": "function", "function": {"name": choice.get("name")}}
        return {
            "messages": messages,
            "max_tokens": int(body["max_tokens"]),
            "stream": body.get("stream") is True,
            "tools": chat_tools(names),
            "tool_choice": chat_choice,
        }

    def encoder(self, model: str, tool: str | None, serial: int, cache: bool) -> MessagesEncoder:
        """The encoder of one answer."""
        return MessagesEncoder(model, tool, serial, cache)

    def error(self, status: int, message: str) -> bytes:
        """An error body in the Messages API's shape."""
        kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
        return orjson.dumps({"type": "error", "error": {"type": kind, "message": message}})


class MessagesEncoder:
    """The SSE events of one streamed message."""

    __slots__ = ("arguments", "cache", "model", "serial", "started", "tool")

    def __init__(self, model: str, tool: str | None, serial: int, cache: bool) -> None:
        self.model, self.tool, self.serial, self.cache = model, tool, serial, cache
        self.arguments = ArgumentPieces()
        self.started = False

    def _usage(self, prompt: Prompt) -> dict[str, int]:
        if not self.cache:
            return {"input_tokens": prompt.tokens}
        return {
            "input_tokens": prompt.tokens - prompt.cached,
            "cache_read_input_tokens": prompt.cached,
            "cache_creation_input_tokens": 0,
        }

    def start(self, prompt: Prompt) -> str:
        """``message_start`` and a ``ping``."""
        message: dict[str, Any] = {
            "id": f"msg_sim_{self.serial}",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {**self._usage(prompt), "output_tokens": 1},
        }
        return sse("message_start", {"type": "message_start", "message": message}) + sse(
            "ping", {"type": "ping"}
        )

    def tokens(self, count: int, last: bool) -> str:
        """A delta of ``count`` tokens; the block's start before the first."""
        head = ""
        if not self.started:
            self.started = True
            block: dict[str, Any] = {"type": "text", "text": ""}
            if self.tool is not None:
                block = {"type": "tool_use", "id": f"toolu_sim_{self.serial}", "name": self.tool}
                block["input"] = {}
            head = sse(
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": block},
            )
        if self.tool is None:
            delta = {"type": "text_delta", "text": " tok" * count}
        else:
            delta = {"type": "input_json_delta", "partial_json": self.arguments.piece(count, last)}
        event = {"type": "content_block_delta", "index": 0, "delta": delta}
        return head + sse("content_block_delta", event)

    def end(self, prompt: Prompt, produced: int) -> str:
        """The block's stop, ``message_delta`` and ``message_stop``."""
        reason = "max_tokens" if self.tool is None else "tool_use"
        tail = ""
        if self.tool is not None and not self.arguments.closed:
            delta = {"type": "input_json_delta", "partial_json": '"}'}
            tail = sse(
                "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
            )
        return (
            tail
            + sse("content_block_stop", {"type": "content_block_stop", "index": 0})
            + sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": reason, "stop_sequence": None},
                    "usage": {"output_tokens": produced},
                },
            )
            + sse("message_stop", {"type": "message_stop"})
        )


DIALECT = AnthropicDialect()
