"""``kind: azure-openai``: Azure OpenAI chat completions.

Same SSE dialect as OpenAI (Azure adds a first chunk with empty ``choices`` carrying
``prompt_filter_results``, which is not a token), addressed differently: the deployment
is in the path, ``api-version`` is a query parameter and the key travels in an
``api-key`` header rather than as a bearer token. 429 answers carry ``retry-after`` and
``retry-after-ms``.
"""

from __future__ import annotations

from urllib.parse import quote

from scenarios.providers.base import join_url
from scenarios.providers.kinds import AzureOpenAIProvider
from workers.client.adapters.base import AdapterContext, read_secret, register
from workers.client.adapters.openai_chat import chat_adapter
from workers.client.adapters.post_stream import PostStreamAdapter
from workers.client.streaming import Limits, json_headers


def azure_chat_url(provider: AzureOpenAIProvider) -> str:
    """``{endpoint}/openai/deployments/{deployment}/chat/completions?api-version=...``."""
    deployment = quote(provider.deployment_name or provider.model, safe="")
    return (
        join_url(provider.endpoint, f"openai/deployments/{deployment}/chat/completions")
        + f"?api-version={quote(provider.api_version, safe='')}"
    )


@register("azure-openai")
async def azure_adapter(
    provider: AzureOpenAIProvider, context: AdapterContext
) -> PostStreamAdapter:
    """Adapter of one Azure OpenAI deployment."""
    key = read_secret(provider.api_key_env, provider.endpoint, provider.name, context)
    headers = json_headers()
    headers["api-key"] = key or ""
    return chat_adapter(
        url=azure_chat_url(provider),
        model=provider.deployment_name or provider.model,
        headers=headers,
        limits=Limits.of(provider, key),
        retry=provider.retry,
    )
