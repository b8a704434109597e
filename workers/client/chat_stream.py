"""Interpretation of an OpenAI-compatible chat-completions SSE stream (pure logic).

What every OpenAI-compatible stream shares (``[DONE]``, errors, ``usage``, the finish) is
``workers/client/openai_stream.py``; a chat choice's ``delta`` is read here: a role-only
first chunk is not a token; reasoning text counts for ``first_token`` but not for
``first_output_token`` (docs/metrics.md); a tool-call delta is output like content (and its
first stamp and the number of calls are kept); the server's usage may add reasoning and
image prompt tokens. The answer's text is kept only when the result asks for it
(``result.answer``: a session's next turn).
"""

from __future__ import annotations

from typing import Any

from workers.client.errors import ProtocolFailure
from workers.client.openai_stream import REASONING_KEYS, OpenAIStream
from workers.client.result import RequestResult

# Distinct tool calls counted per answer: a hostile server cannot grow the set unbounded.
_MAX_TOOL_CALLS = 1024


class ChatStream(OpenAIStream):
    """Accumulates one streamed chat completion into a RequestResult."""

    __slots__ = ("tool_keys",)

    def __init__(self, result: RequestResult) -> None:
        super().__init__(result)
        self.tool_keys: set[tuple[int, int]] = set()  # (choice, tool call index) seen

    def _on_choice(self, choice: Any, stamp: int) -> tuple[bool, bool]:
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if not isinstance(delta, dict):
            raise ProtocolFailure("choice without a 'delta' object")
        has_token = has_output = False
        if delta.get("tool_calls"):
            index = choice.get("index")
            self._on_tool_calls(index if isinstance(index, int) else 0, delta["tool_calls"], stamp)
            has_token = has_output = True
        content = delta.get("content")
        if content:
            has_token = has_output = True
            if self.result.answer is not None and isinstance(content, str):
                self.result.answer.add(content)
        elif any(delta.get(key) for key in REASONING_KEYS):
            has_token = True
        return has_token, has_output

    def _on_tool_calls(self, choice: int, tool_calls: Any, stamp: int) -> None:
        """A tool-call delta: output like content (docs/metrics.md). OpenAI streams each
        call as deltas sharing its ``index`` (the first carries ``id`` and the function's
        name, the rest pieces of ``arguments``), so calls are counted by distinct index."""
        if not isinstance(tool_calls, list):
            raise ProtocolFailure("'tool_calls' is not a list")
        if self.result.tool_call_at is None:
            self.result.tool_call_at = stamp
        for call in tool_calls:
            index = call.get("index") if isinstance(call, dict) else None
            # Some servers omit the index when they send each call whole: one call each.
            key = (choice, index) if isinstance(index, int) else (choice, len(self.tool_keys))
            if key not in self.tool_keys and len(self.tool_keys) < _MAX_TOOL_CALLS:
                self.tool_keys.add(key)
        self.result.tool_calls = len(self.tool_keys)

    def _on_usage(self, usage: dict[str, Any]) -> bool:
        if not super()._on_usage(usage):
            return False
        details = usage.get("completion_tokens_details")
        if isinstance(details, dict) and isinstance(details.get("reasoning_tokens"), int):
            self.result.reasoning_tokens = details["reasoning_tokens"]
        # Gateways translating Gemini (and the simulator) split the prompt by modality;
        # OpenAI's own prompt_tokens_details has cached and audio tokens only.
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict) and isinstance(details.get("image_tokens"), int):
            self.result.image_prompt_tokens = details["image_tokens"]
        return True
