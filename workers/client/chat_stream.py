"""Interpretation of an OpenAI-compatible chat-completions SSE stream (pure logic).

Fed one decoded SSE payload at a time with the arrival stamp of its bytes, it records
the stamps of docs/metrics.md: a role-only first chunk is not a token; reasoning text counts
for ``first_token`` but not for ``first_output_token``; a tool-call delta is output like
content (and its first stamp and the number of calls are kept); a chunk with several tokens is
one event; ``usage`` supplies the counts when the server sends it. An answer is finished
when a choice carries a ``finish_reason``; a stream that ends without one, even with
``[DONE]``, is an incomplete answer (docs/metrics.md). The answer's text is kept only
when the result asks for it (``result.answer``: a session's next turn).
"""

from __future__ import annotations

from typing import Any

from workers.client.errors import IncompleteAnswer, ProtocolFailure
from workers.client.finish import OPENAI_REASONS, finish_reason
from workers.client.result import RequestResult
from workers.client.streaming import json_object, settle_counts, stream_error, token_event

_DONE = b"[DONE]"
_REASONING_KEYS = ("reasoning_content", "reasoning")
# Distinct tool calls counted per answer: a hostile server cannot grow the set unbounded.
_MAX_TOOL_CALLS = 1024


class ChatStream:
    """Accumulates one streamed chat completion into a RequestResult."""

    __slots__ = ("completion", "done", "finished", "prompt", "result", "token_events", "tool_keys")

    def __init__(self, result: RequestResult) -> None:
        self.result = result
        self.done = False  # saw [DONE]
        self.finished: str | None = None  # the finish_reason, once a choice carried one
        self.token_events = 0
        self.prompt: int | None = None  # usage, when the server sends it
        self.completion: int | None = None
        self.tool_keys: set[tuple[int, int]] = set()  # (choice, tool call index) seen

    def on_payload(self, payload: bytes, stamp: int) -> None:
        """Account for one SSE ``data`` payload that arrived at ``stamp``."""
        if payload == _DONE:
            self.done = True
            return
        if not payload.strip():
            return
        message = json_object(payload)
        if "error" in message:
            raise stream_error(message["error"])
        choices = message.get("choices")
        if choices:
            self._on_choices(choices, stamp)
        usage = message.get("usage")
        if isinstance(usage, dict):
            self._on_usage(usage)

    def _on_choices(self, choices: Any, stamp: int) -> None:
        if not isinstance(choices, list):
            raise ProtocolFailure("'choices' is not a list")
        has_token = has_output = False
        for choice in choices:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if not isinstance(delta, dict):
                raise ProtocolFailure("choice without a 'delta' object")
            if delta.get("tool_calls"):
                index = choice.get("index")
                self._on_tool_calls(
                    index if isinstance(index, int) else 0, delta["tool_calls"], stamp
                )
                has_token = has_output = True
            content = delta.get("content")
            if content:
                has_token = has_output = True
                if self.result.answer is not None and isinstance(content, str):
                    self.result.answer.add(content)
            elif any(delta.get(key) for key in _REASONING_KEYS):
                has_token = True
            reason = finish_reason(choice.get("finish_reason"), OPENAI_REASONS)
            if reason is not None:
                self.finished = reason
        if has_token:
            token_event(self.result, stamp, output=has_output)
            self.token_events += 1

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

    def _on_usage(self, usage: dict[str, Any]) -> None:
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if isinstance(prompt, int) and isinstance(completion, int):
            self.prompt, self.completion = prompt, completion
            details = usage.get("completion_tokens_details")
            if isinstance(details, dict) and isinstance(details.get("reasoning_tokens"), int):
                self.result.reasoning_tokens = details["reasoning_tokens"]
            # Gateways translating Gemini (and the simulator) split the prompt by modality;
            # OpenAI's own prompt_tokens_details has cached and audio tokens only.
            details = usage.get("prompt_tokens_details")
            if isinstance(details, dict) and isinstance(details.get("image_tokens"), int):
                self.result.image_prompt_tokens = details["image_tokens"]

    def finish(self) -> None:
        """Close the stream: check the answer finished and settle token counts."""
        if self.finished is None:
            ending = "with [DONE]" if self.done else "without [DONE]"
            raise IncompleteAnswer(
                f"stream ended {ending} but no finish_reason after {self.token_events} token events"
            )
        self.result.finish_reason = self.finished
        settle_counts(self.result, self.prompt, self.completion, self.token_events)
