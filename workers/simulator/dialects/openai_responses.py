"""The simulator's Responses API (``POST /v1/responses``, OpenAI's streaming events).

An answer is ``response.created`` (the response id), then with the first token
``response.output_item.added`` (a ``message``, or a ``function_call`` naming the tool) and
``response.output_text.delta`` (or ``response.function_call_arguments.delta``) events, and
one terminal event: ``response.incomplete`` with ``incomplete_details.reason:
max_output_tokens`` for text (the simulator always fills the length, as a real answer cut
at ``max_output_tokens`` ends) or ``response.completed`` for a function call, with
``usage`` (``input_tokens_details.cached_tokens`` with a prefix cache). Every event carries
its ``sequence_number``; there is no ``[DONE]``. Errors are ``{"error": {...}}`` bodies.
"""

from __future__ import annotations

from typing import Any

import orjson

from workers.simulator.dialects.serve import ArgumentPieces, Prompt, chat_tools, sse, text_of

_ERROR_CODES = {429: "rate_limit_exceeded", 400: "invalid_request_error"}


class ResponsesDialect:
    """Request and answer shapes of the Responses API."""

    name = "openai-responses"
    request_id_header: str | None = "x-request-id"

    def as_chat(self, body: dict[str, Any], query: str) -> dict[str, Any]:
        """The Responses request as a chat request."""
        messages: list[dict[str, Any]] = []
        if body.get("instructions"):
            messages.append({"role": "system", "content": text_of(body["instructions"])})
        given = body["input"]
        if isinstance(given, str):
            messages.append({"role": "user", "content": given})
        else:
            for item in given:
                messages.append({"role": str(item["role"]), "content": text_of(item["content"])})
        names = [str(tool["name"]) for tool in body.get("tools") or [] if tool.get("name")]
        choice = body.get("tool_choice", "auto")
        if isinstance(choice, dict):
            choice = {"type": "function", "function": {"name": choice.get("name")}}
        return {
            "messages": messages,
            "max_tokens": int(body.get("max_output_tokens") or 16),
            "stream": body.get("stream") is True,
            "tools": chat_tools(names),
            "tool_choice": choice,
        }

    def encoder(self, model: str, tool: str | None, serial: int, cache: bool) -> ResponsesEncoder:
        """The encoder of one answer."""
        return ResponsesEncoder(model, tool, serial, cache)

    def error(self, status: int, message: str) -> bytes:
        """An error body in OpenAI's shape."""
        code = _ERROR_CODES.get(status, "server_error" if status >= 500 else "invalid_request")
        error = {"message": message, "type": code, "param": None, "code": code}
        return orjson.dumps({"error": error})


class ResponsesEncoder:
    """The SSE events of one streamed response."""

    __slots__ = ("arguments", "cache", "model", "sequence", "serial", "started", "tool")

    def __init__(self, model: str, tool: str | None, serial: int, cache: bool) -> None:
        self.model, self.tool, self.serial, self.cache = model, tool, serial, cache
        self.arguments = ArgumentPieces()
        self.started = False
        self.sequence = 0

    def _event(self, kind: str, fields: dict[str, Any]) -> str:
        event = sse(kind, {"type": kind, "sequence_number": self.sequence, **fields})
        self.sequence += 1
        return event

    def _response(self, status: str, **fields: Any) -> dict[str, Any]:
        return {
            "id": f"resp_sim_{self.serial}",
            "object": "response",
            "status": status,
            "model": self.model,
            **fields,
        }

    def _item_id(self) -> str:
        return f"{'fc' if self.tool is not None else 'msg'}_sim_{self.serial}"

    def start(self, prompt: Prompt) -> str:
        """``response.created``."""
        return self._event(
            "response.created", {"response": self._response("in_progress", output=[], usage=None)}
        )

    def tokens(self, count: int, last: bool) -> str:
        """A delta of ``count`` tokens; the output item's start before the first."""
        head = ""
        if not self.started:
            self.started = True
            item: dict[str, Any] = {
                "id": self._item_id(),
                "type": "message",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
            if self.tool is not None:
                item = {
                    "id": self._item_id(),
                    "type": "function_call",
                    "call_id": f"call_sim_{self.serial}",
                    "name": self.tool,
                    "arguments": "",
                    "status": "in_progress",
                }
            head = self._event("response.output_item.added", {"output_index": 0, "item": item})
        where = {"item_id": self._item_id(), "output_index": 0}
        if self.tool is None:
            return head + self._event(
                "response.output_text.delta", {**where, "content_index": 0, "delta": " tok" * count}
            )
        return head + self._event(
            "response.function_call_arguments.delta",
            {**where, "delta": self.arguments.piece(count, last)},
        )

    def end(self, prompt: Prompt, produced: int) -> str:
        """The terminal event with usage."""
        usage: dict[str, Any] = {
            "input_tokens": prompt.tokens,
            "output_tokens": produced,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt.tokens + produced,
        }
        if self.cache:
            usage["input_tokens_details"] = {"cached_tokens": prompt.cached}
        tail = ""
        if self.tool is not None and not self.arguments.closed:
            tail = self._event(
                "response.function_call_arguments.delta",
                {"item_id": self._item_id(), "output_index": 0, "delta": '"}'},
            )
        if self.tool is not None:
            response = self._response("completed", usage=usage, incomplete_details=None)
            return tail + self._event("response.completed", {"response": response})
        response = self._response(
            "incomplete", usage=usage, incomplete_details={"reason": "max_output_tokens"}
        )
        return self._event("response.incomplete", {"response": response})


DIALECT = ResponsesDialect()
