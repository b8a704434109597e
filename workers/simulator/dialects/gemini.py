"""The simulator's Gemini API (``POST /v1beta/models/{model}:streamGenerateContent?alt=sse``).

Each event is a ``GenerateContentResponse`` ``data:`` line: a candidate whose parts carry
the new text, the ``responseId`` and ``modelVersion``; the last one has the candidate's
``finishReason`` (``MAX_TOKENS``: the simulator always fills the length; ``STOP`` after a
function call) and ``usageMetadata`` (``promptTokenCount``, ``candidatesTokenCount``,
``totalTokenCount`` and, with a prefix cache, ``cachedContentTokenCount``). A function
call is one whole ``functionCall`` part, sent when its last token is produced, as Gemini
sends calls whole. Only ``alt=sse`` is served (Gemini's other stream is a JSON array).
Errors are ``{"error": {"code", "message", "status"}}`` bodies.
"""

from __future__ import annotations

from typing import Any

import orjson

from workers.simulator.dialects.serve import ArgumentPieces, Prompt, chat_tools, sse, text_of

_STATUS = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


class GeminiDialect:
    """Request and answer shapes of the Gemini API."""

    name = "gemini"
    request_id_header: str | None = None

    def as_chat(self, body: dict[str, Any], query: str) -> dict[str, Any]:
        """The ``streamGenerateContent`` request as a chat request."""
        messages: list[dict[str, Any]] = []
        system = body.get("systemInstruction")
        if system:
            messages.append({"role": "system", "content": text_of(system["parts"])})
        for content in body["contents"]:
            role = "assistant" if content.get("role") == "model" else "user"
            messages.append({"role": role, "content": text_of(content["parts"])})
        names = [
            str(function["name"])
            for tool in body.get("tools") or []
            for function in tool.get("functionDeclarations") or []
        ]
        config = (body.get("toolConfig") or {}).get("functionCallingConfig") or {}
        mode = config.get("mode", "AUTO")
        choice: Any = {"ANY": "required", "NONE": "none"}.get(str(mode), "auto")
        allowed = config.get("allowedFunctionNames") or []
        if mode == "ANY" and len(allowed) == 1:
            choice = {"type": "function", "function": {"name": allowed[0]}}
        generation = body.get("generationConfig") or {}
        return {
            "messages": messages,
            "max_tokens": int(generation.get("maxOutputTokens") or 16),
            "stream": "alt=sse" in query.split("&"),
            "tools": chat_tools(names),
            "tool_choice": choice,
        }

    def encoder(self, model: str, tool: str | None, serial: int, cache: bool) -> GeminiEncoder:
        """The encoder of one answer."""
        return GeminiEncoder(model, tool, serial, cache)

    def error(self, status: int, message: str) -> bytes:
        """An error body in Google's shape."""
        kind = _STATUS.get(status, "INTERNAL" if status >= 500 else "INVALID_ARGUMENT")
        return orjson.dumps({"error": {"code": status, "message": message, "status": kind}})


class GeminiEncoder:
    """The SSE events of one streamed ``GenerateContentResponse``."""

    __slots__ = ("cache", "model", "produced", "serial", "tool")

    def __init__(self, model: str, tool: str | None, serial: int, cache: bool) -> None:
        self.model, self.tool, self.serial, self.cache = model, tool, serial, cache
        self.produced = 0

    def _event(self, parts: list[dict[str, Any]], **extra: Any) -> str:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        candidate.update(extra.pop("candidate", {}))
        return sse(
            None,
            {
                "candidates": [candidate],
                "modelVersion": self.model,
                "responseId": f"sim-{self.serial}",
                **extra,
            },
        )

    def start(self, prompt: Prompt) -> str:
        """Nothing: Gemini's first event carries the first text."""
        return ""

    def tokens(self, count: int, last: bool) -> str:
        """An event of ``count`` tokens (a function call: only its whole, when done)."""
        self.produced += count
        if self.tool is None:
            return self._event([{"text": " tok" * count}])
        if not last:
            return ""
        call = {"name": self.tool, "args": ArgumentPieces().whole(self.produced)}
        return self._event([{"functionCall": call}])

    def end(self, prompt: Prompt, produced: int) -> str:
        """The last event: the finish reason and usage."""
        usage: dict[str, int] = {
            "promptTokenCount": prompt.tokens,
            "candidatesTokenCount": produced,
            "totalTokenCount": prompt.tokens + produced,
        }
        if self.cache:
            usage["cachedContentTokenCount"] = prompt.cached
        parts: list[dict[str, Any]] = [{"text": ""}]
        reason = "MAX_TOKENS" if self.tool is None else "STOP"
        return self._event(parts, candidate={"finishReason": reason}, usageMetadata=usage)


DIALECT = GeminiDialect()
