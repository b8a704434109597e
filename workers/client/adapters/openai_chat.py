"""``kind: openai`` and ``kind: simulated``: OpenAI-compatible streaming chat completions.

The stream is interpreted by ``chat_stream.ChatStream`` (role-only chunks are not
tokens, reasoning text counts for ``first_token`` only, ``usage`` supplies the counts);
this module sends the request through the shared measurement core so that 429 answers
keep their Retry-After and the provider's ``retry`` option applies.
"""

from __future__ import annotations

from typing import Any

import orjson

from scenarios.providers.base import RetryPolicy, join_url
from scenarios.providers.kinds import OpenAIProvider, SimulatedProvider
from workers.client.adapters.base import (
    AdapterContext,
    ProviderSetupError,
    read_secret,
    register,
)
from workers.client.adapters.post_stream import PostStreamAdapter
from workers.client.chat_stream import ChatStream
from workers.client.image_parts import with_images
from workers.client.openai_stream import OpenAIParser
from workers.client.streaming import Limits, json_headers
from workers.prompts.plan import PlannedRequest


class ChatParser(OpenAIParser):
    """SSE splitting plus ChatStream interpretation, as a StreamParser."""

    __slots__ = ()
    stream_kind = ChatStream


def chat_body(
    model: str,
    request: PlannedRequest,
    enforce_output_length: bool = False,
    extra_body: dict[str, Any] | None = None,
) -> bytes:
    """Request body asking for a stream with usage, answer bounded by the planned output
    length; a prompt file's or replay log's conversation is sent as it was captured, and
    the workload's tools and images with the requests that carry them."""
    messages = (
        [{"role": role, "content": content} for role, content in request.messages]
        if request.messages
        else [{"role": "user", "content": request.prompt}]
    )
    body: dict[str, Any] = {
        "model": model,
        "messages": with_images(messages, request.images),
        "max_tokens": request.output_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools is not None:
        body["tools"] = request.tools.tools
        body["tool_choice"] = request.tools.tool_choice
    if enforce_output_length:
        body["ignore_eos"] = True
        body["min_tokens"] = request.output_tokens
    if extra_body:
        body.update(extra_body)
    if request.request_id is not None and "user" not in body:
        # Gateways pass the body's user field on where they drop unknown headers.
        body["user"] = request.request_id
    return orjson.dumps(body)


def chat_adapter(
    url: str,
    model: str,
    headers: dict[str, str],
    limits: Limits,
    retry: RetryPolicy | None = None,
    enforce_output_length: bool = False,
    extra_body: dict[str, Any] | None = None,
) -> PostStreamAdapter:
    """Streaming chat completions at ``url`` (OpenAI-compatible, the simulator, Azure)."""
    return PostStreamAdapter(
        url=url,
        headers=headers,
        limits=limits,
        retry=retry,
        body=lambda request: chat_body(model, request, enforce_output_length, extra_body),
        parser=ChatParser,
        model=model,
    )


def _chat_adapter(
    provider: OpenAIProvider | SimulatedProvider, base_url: str, model: str, key: str | None
) -> PostStreamAdapter:
    openai = provider if isinstance(provider, OpenAIProvider) else None
    return chat_adapter(
        url=join_url(base_url, "chat/completions"),
        model=model,
        headers=json_headers(key),
        limits=Limits.of(provider, key),
        retry=provider.retry,
        # The simulator always answers with exactly max_tokens: no knobs needed there.
        enforce_output_length=openai is not None and openai.enforce_output_length,
        extra_body=openai.extra_body if openai is not None else None,
    )


@register("openai")
async def openai_adapter(provider: OpenAIProvider, context: AdapterContext) -> PostStreamAdapter:
    """Adapter of an OpenAI-compatible endpoint; the key comes from the worker's env."""
    key = read_secret(provider.api_key_env, provider.base_url, provider.name, context)
    return _chat_adapter(provider, provider.base_url, provider.model, key)


@register("simulated")
async def simulated_adapter(
    provider: SimulatedProvider, context: AdapterContext
) -> PostStreamAdapter:
    """Adapter of the built-in simulated endpoint; the caller starts it on loopback and
    hands its base URL in ``context.endpoint`` (starting processes is worker runtime)."""
    if context.endpoint is None:
        raise ProviderSetupError(f"provider {provider.name!r}: no simulated endpoint was started")
    return _chat_adapter(provider, context.endpoint, provider.model, None)
