"""``kind: openai-completions``: OpenAI-compatible legacy ``/v1/completions`` streaming.

Each SSE event carries ``choices[].text``; a non-empty text is one token-bearing event
(several tokens in one chunk are still one event). Servers that reason (vLLM with a
reasoning parser) may send ``reasoning_content``/``reasoning`` beside ``text``; that
counts for ``first_token`` but not ``first_output_token``. ``usage`` comes in a last
chunk with empty ``choices`` when ``stream_options.include_usage`` is honoured. The answer
is finished when a choice carries a ``finish_reason``; without one it is incomplete, even
after ``[DONE]``. ``enforce_output_length`` and ``extra_body`` shape the body as for chat.
"""

from __future__ import annotations

from typing import Any

import orjson

from scenarios.provider_base import join_url
from scenarios.providers import OpenAICompletionsProvider
from workers.client.adapters.base import AdapterContext, read_secret, register
from workers.client.adapters.post_stream import PostStreamAdapter
from workers.client.errors import IncompleteAnswer, ProtocolFailure
from workers.client.finish import OPENAI_REASONS, finish_reason
from workers.client.result import RequestResult
from workers.client.sse import SSEDecoder
from workers.client.streaming import (
    Limits,
    json_headers,
    json_object,
    settle_counts,
    stream_error,
    token_event,
)
from workers.prompts import PlannedRequest

_DONE = b"[DONE]"
_REASONING_KEYS = ("reasoning_content", "reasoning")


class CompletionsParser:
    """Interprets a ``/v1/completions`` SSE stream into a RequestResult."""

    __slots__ = ("completion", "decoder", "done", "events", "finished", "prompt", "result")

    def __init__(self, result: RequestResult) -> None:
        self.result = result
        self.decoder = SSEDecoder()
        self.done = False
        self.finished: str | None = None  # the finish_reason, once a choice carried one
        self.events = 0
        self.prompt: int | None = None
        self.completion: int | None = None

    def feed(self, chunk: bytes, stamp: int) -> None:
        """Interpret the events completed by ``chunk``."""
        for payload in self.decoder.feed(chunk):
            self._on_payload(payload, stamp)

    def _on_payload(self, payload: bytes, stamp: int) -> None:
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
            prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
            if isinstance(prompt, int) and isinstance(completion, int):
                self.prompt, self.completion = prompt, completion

    def _on_choices(self, choices: Any, stamp: int) -> None:
        if not isinstance(choices, list):
            raise ProtocolFailure("'choices' is not a list")
        has_token = has_output = False
        for choice in choices:
            if not isinstance(choice, dict):
                raise ProtocolFailure("choice is not an object")
            if choice.get("text"):
                has_token = has_output = True
            elif any(choice.get(key) for key in _REASONING_KEYS):
                has_token = True
            reason = finish_reason(choice.get("finish_reason"), OPENAI_REASONS)
            if reason is not None:
                self.finished = reason
        if has_token:
            token_event(self.result, stamp, output=has_output)
            self.events += 1

    def finish(self, stamp: int) -> None:
        """Interpret an unterminated last event, check the answer finished, settle counts."""
        for payload in self.decoder.flush():
            self._on_payload(payload, stamp)
        if self.finished is None:
            ending = "with [DONE]" if self.done else "without [DONE]"
            raise IncompleteAnswer(
                f"stream ended {ending} but no finish_reason after {self.events} token events"
            )
        self.result.finish_reason = self.finished
        settle_counts(self.result, self.prompt, self.completion, self.events)


def completions_body(
    model: str,
    request: PlannedRequest,
    enforce_output_length: bool = False,
    extra_body: dict[str, Any] | None = None,
) -> bytes:
    """A streaming completions request asking for usage, bounded by the planned output
    length; with ``enforce_output_length`` also ``ignore_eos`` and ``min_tokens`` (vLLM,
    SGLang; llama-cpp-python honours ``min_tokens`` only), then ``extra_body`` merged in."""
    body: dict[str, Any] = {
        "model": model,
        "prompt": request.prompt,
        "max_tokens": request.output_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if enforce_output_length:
        body["ignore_eos"] = True
        body["min_tokens"] = request.output_tokens
    if extra_body:
        body.update(extra_body)
    return orjson.dumps(body)


@register("openai-completions")
async def completions_adapter(
    provider: OpenAICompletionsProvider, context: AdapterContext
) -> PostStreamAdapter:
    """Adapter of an OpenAI-compatible completions endpoint."""
    key = read_secret(provider.api_key_env, provider.base_url, provider.name, context)
    model, enforce, extra = provider.model, provider.enforce_output_length, provider.extra_body
    return PostStreamAdapter(
        url=join_url(provider.base_url, "completions"),
        headers=json_headers(key),
        limits=Limits.of(provider, key),
        retry=provider.retry,
        body=lambda request: completions_body(model, request, enforce, extra),
        parser=CompletionsParser,
    )
