"""``kind: openai-completions``: OpenAI-compatible legacy ``/v1/completions`` streaming.

Each SSE event carries ``choices[].text``; a non-empty text is one token-bearing event
(several tokens in one chunk are still one event). Servers that reason (vLLM with a
reasoning parser) may send ``reasoning_content``/``reasoning`` beside ``text``; that
counts for ``first_token`` but not ``first_output_token``. ``usage`` comes in a last
chunk with empty ``choices`` when ``stream_options.include_usage`` is honoured. The answer
is finished when a choice carries a ``finish_reason``; without one it is incomplete, even
after ``[DONE]`` (what chat shares: ``workers/client/openai_stream.py``).
``enforce_output_length`` and ``extra_body`` shape the body as for chat.
"""

from __future__ import annotations

from typing import Any

import orjson

from scenarios.providers.base import join_url
from scenarios.providers.kinds import OpenAICompletionsProvider
from workers.client.adapters.base import AdapterContext, read_secret, register
from workers.client.adapters.post_stream import PostStreamAdapter
from workers.client.errors import ProtocolFailure
from workers.client.openai_stream import REASONING_KEYS, OpenAIParser, OpenAIStream
from workers.client.streaming import Limits, json_headers
from workers.prompts.plan import PlannedRequest


class CompletionsStream(OpenAIStream):
    """A ``/v1/completions`` stream: a choice's token is its ``text`` (or reasoning)."""

    __slots__ = ()

    def _on_choice(self, choice: Any, stamp: int) -> tuple[bool, bool]:
        if not isinstance(choice, dict):
            raise ProtocolFailure("choice is not an object")
        if choice.get("text"):
            return True, True
        return any(choice.get(key) for key in REASONING_KEYS), False


class CompletionsParser(OpenAIParser):
    """Interprets a ``/v1/completions`` SSE stream into a RequestResult."""

    __slots__ = ()
    stream_kind = CompletionsStream


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
