"""The Azure OpenAI adapter: deployment in the path, api-version in the query, the key in
an ``api-key`` header and only for the host it is bound to."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson
import pytest

from scenarios.providers.kinds import AzureOpenAIProvider
from workers.client.adapters.azure_openai import azure_adapter, azure_chat_url
from workers.client.adapters.base import AdapterContext, build_adapter
from workers.client.adapters.post_stream import PostStreamAdapter
from workers.client.secrets import SecretRefused, Secrets
from workers.prompts.plan import PlannedRequest

ENDPOINT = "https://my-resource.openai.azure.com"
KEY = "az-0123456789abcdef0123456789abcdef"


def provider(**fields: Any) -> AzureOpenAIProvider:
    return AzureOpenAIProvider.model_validate(
        {
            "name": "az",
            "kind": "azure-openai",
            "endpoint": ENDPOINT,
            "model": "gpt-4o-mini",
            "api_key_env": "AZ_KEY",
            **fields,
        }
    )


def build(
    spec: AzureOpenAIProvider, bound_to: str = "my-resource.openai.azure.com"
) -> PostStreamAdapter:
    async def go() -> PostStreamAdapter:
        async with httpx.AsyncClient() as http:
            context = AdapterContext(http, Secrets({"AZ_KEY": (bound_to,)}, {"AZ_KEY": KEY}))
            adapter = await azure_adapter(spec, context)
            # The registry gives the same adapter for the kind.
            registered = await build_adapter(spec, context)
        assert isinstance(adapter, PostStreamAdapter)
        assert isinstance(registered, PostStreamAdapter) and registered.url == adapter.url
        return adapter

    return asyncio.run(go())


def test_url_names_the_deployment_and_the_api_version() -> None:
    assert azure_chat_url(provider()) == (
        f"{ENDPOINT}/openai/deployments/gpt-4o-mini/chat/completions?api-version=2024-10-21"
    )
    custom = provider(
        endpoint=f"{ENDPOINT}/", deployment_name="prod gpt/4o", api_version="2025-01-01-preview"
    )
    # One slash after the endpoint; the deployment is one path segment, quoted.
    assert azure_chat_url(custom) == (
        f"{ENDPOINT}/openai/deployments/prod%20gpt%2F4o/chat/completions"
        "?api-version=2025-01-01-preview"
    )


def test_adapter_sends_the_key_as_api_key_and_names_the_deployment() -> None:
    adapter = build(provider(deployment_name="prod-4o"))
    assert adapter.url == azure_chat_url(provider(deployment_name="prod-4o"))
    assert adapter.headers["api-key"] == KEY
    assert "authorization" not in {h.lower() for h in adapter.headers}
    assert adapter.model == "prod-4o"
    assert KEY in adapter.limits.secrets  # redacted from any error message
    body = orjson.loads(adapter.body(PlannedRequest(0, 8, 16, "hello")))
    assert body["model"] == "prod-4o" and body["max_tokens"] == 16
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_key_is_refused_for_a_host_it_is_not_bound_to() -> None:
    with pytest.raises(SecretRefused, match="AZ_KEY"):
        build(provider(), bound_to="other.openai.azure.com")
