"""What the OpenAI-compatible SSE streams share: chat completions and legacy completions.

Fed one decoded SSE ``data`` payload at a time with the arrival stamp of its bytes: a
``[DONE]`` is noted, an ``error`` object fails the request, each choice is read by the
stream's kind (``_on_choice``: a chat ``delta``, a completions ``text``) and may carry the
``finish_reason``, the first chunk's ``id`` is the response's id, and ``usage`` supplies
the counts when the server sends it. Several tokens in one chunk are still one
token-bearing event. An answer is finished when a choice carried a ``finish_reason``; a
stream that ends without one, even with ``[DONE]``, is an incomplete answer
(docs/metrics.md). :class:`OpenAIParser` adds the SSE splitting that makes a stream a
``StreamParser`` of ``workers/client/adapters/post_stream.py``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from workers.client.errors import IncompleteAnswer, ProtocolFailure
from workers.client.finish import OPENAI_REASONS, finish_reason
from workers.client.result import RequestResult
from workers.client.server_ids import note_response_id
from workers.client.sse import SSEDecoder
from workers.client.streaming import (
    counted,
    json_object,
    settle_counts,
    stream_error,
    token_event,
)

_DONE = b"[DONE]"
REASONING_KEYS = ("reasoning_content", "reasoning")


class OpenAIStream:
    """Accumulates one streamed OpenAI-compatible answer into a RequestResult; a kind of
    stream says what one choice holds (:meth:`_on_choice`)."""

    __slots__ = ("completion", "done", "finished", "prompt", "result", "token_events")

    def __init__(self, result: RequestResult) -> None:
        self.result = result
        self.done = False  # saw [DONE]
        self.finished: str | None = None  # the finish_reason, once a choice carried one
        self.token_events = 0
        self.prompt: int | None = None  # usage, when the server sends it
        self.completion: int | None = None

    def on_payload(self, payload: bytes, stamp: int) -> None:
        """Account for one SSE ``data`` payload that arrived at ``stamp``."""
        if payload == _DONE:
            self.done = True
            return
        if not payload or payload.isspace():  # a blank payload (not a copy of each)
            return
        message = json_object(payload)
        if "error" in message:
            raise stream_error(message["error"])
        if self.result.response_id is None:  # every chunk repeats the stream's id
            note_response_id(self.result, message.get("id"))
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
            token, output = self._on_choice(choice, stamp)
            has_token = has_token or token
            has_output = has_output or output
            reason = finish_reason(choice.get("finish_reason"), OPENAI_REASONS)
            if reason is not None:
                self.finished = reason
        if has_token:
            token_event(self.result, stamp, output=has_output)
            self.token_events += 1

    def _on_choice(self, choice: Any, stamp: int) -> tuple[bool, bool]:
        """Read one choice (raising ProtocolFailure when it is not one): whether it
        carries a token, and whether that token is output (not reasoning)."""
        raise NotImplementedError

    def _on_usage(self, usage: dict[str, Any]) -> bool:
        """Keep the server's counts; whether it gave both. Prompt tokens read from the
        server's prefix cache (``prompt_tokens_details.cached_tokens``, OpenAI and vLLM)
        are kept when reported, else left unknown (None, never zero)."""
        cached = cached_tokens(usage)
        if cached is not None:  # a later usage chunk without details does not unsay it
            self.result.cached_tokens = cached
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if isinstance(prompt, int) and isinstance(completion, int):
            self.prompt, self.completion = prompt, completion
            return True
        return False

    def finish(self) -> None:
        """Close the stream: check the answer finished and settle token counts."""
        if self.finished is None:
            ending = "with [DONE]" if self.done else "without [DONE]"
            raise IncompleteAnswer(
                f"stream ended {ending} but no finish_reason after {self.token_events} token events"
            )
        self.result.finish_reason = self.finished
        settle_counts(self.result, self.prompt, self.completion, self.token_events)


def cached_tokens(usage: dict[str, Any]) -> int | None:
    """``usage.prompt_tokens_details.cached_tokens`` when it is a count (OpenAI, vLLM
    with prefix caching, SGLang); None when the server did not say (docs/metrics.md)."""
    details = usage.get("prompt_tokens_details")
    return counted(details.get("cached_tokens")) if isinstance(details, dict) else None


class OpenAIParser:
    """SSE splitting plus an :class:`OpenAIStream`'s interpretation, as a StreamParser."""

    __slots__ = ("decoder", "stream")
    stream_kind: ClassVar[type[OpenAIStream]]

    def __init__(self, result: RequestResult) -> None:
        self.stream = self.stream_kind(result)
        self.decoder = SSEDecoder()

    def feed(self, chunk: bytes, stamp: int) -> None:
        """Interpret the events completed by ``chunk``."""
        for payload in self.decoder.feed(chunk):
            self.stream.on_payload(payload, stamp)

    def finish(self, stamp: int) -> None:
        """Interpret an unterminated last event, then check the answer finished."""
        for payload in self.decoder.flush():
            self.stream.on_payload(payload, stamp)
        self.stream.finish()
