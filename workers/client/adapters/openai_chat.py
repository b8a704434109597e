"""``kind: openai`` and ``kind: simulated``: OpenAI-compatible streaming chat completions."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from scenarios.model import OpenAIProvider, ProviderBase, SimulatedProvider
from workers.client.adapters.base import read_secret, register
from workers.client.openai_chat import ChatEndpoint, measure_chat
from workers.client.result import RequestResult
from workers.context import WorkerContext
from workers.prompts import PlannedRequest


@dataclass(frozen=True)
class OpenAIChatAdapter:
    """Measures ``/chat/completions`` on one endpoint."""

    endpoint: ChatEndpoint

    async def measure(
        self, http: httpx.AsyncClient, request: PlannedRequest, intended_start: int
    ) -> RequestResult:
        """One measured streaming request."""
        return await measure_chat(
            http,
            self.endpoint,
            request.prompt,
            request.output_tokens,
            request.prompt_tokens,
            intended_start,
        )


def _endpoint(provider: ProviderBase, base_url: str, model: str, key: str | None) -> ChatEndpoint:
    return ChatEndpoint(
        url=base_url.rstrip("/") + "/chat/completions",
        model=model,
        api_key=key,
        timeout_s=provider.timeout_s,
        stall_timeout_s=provider.stall_timeout_s,
        connect_timeout_s=provider.connect_timeout_s,
    )


@register("openai")
async def openai_adapter(provider: OpenAIProvider, context: WorkerContext) -> OpenAIChatAdapter:
    """Adapter of an OpenAI-compatible endpoint; the key comes from the worker's env."""
    key = read_secret(provider.api_key_env, provider.name, context)
    return OpenAIChatAdapter(_endpoint(provider, provider.base_url, provider.model, key))


@register("simulated")
async def simulated_adapter(
    provider: SimulatedProvider, context: WorkerContext
) -> OpenAIChatAdapter:
    """Adapter of the built-in simulated endpoint, started on loopback for this worker."""
    base_url = await context.simulators.base_url(provider)
    return OpenAIChatAdapter(_endpoint(provider, base_url, provider.model, None))
