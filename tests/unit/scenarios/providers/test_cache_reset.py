"""``cache_reset``: where each engine's reset goes, only on the provider's own origin,
never for a hosted API (docs/providers.md, "Cache reset")."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from scenarios.providers.cache_reset import CacheResetUrl, cache_reset_url, same_origin
from scenarios.providers.kinds import Provider

PROVIDER: TypeAdapter[Any] = TypeAdapter(Provider)


def _provider(**fields: Any) -> Any:
    base = {"name": "p", "kind": "openai", "model": "m", "base_url": "http://10.0.0.5:8000/v1"}
    return PROVIDER.validate_python({**base, **fields})


@pytest.mark.parametrize(
    ("setting", "url"),
    [
        ("vllm", "http://10.0.0.5:8000/reset_prefix_cache"),
        ("sglang", "http://10.0.0.5:8000/flush_cache"),
        ({"url": "http://10.0.0.5:8000/admin/reset"}, "http://10.0.0.5:8000/admin/reset"),
    ],
)
def test_each_engine_resets_at_the_root_of_the_servers_origin(setting: Any, url: str) -> None:
    provider = _provider(cache_reset=setting)
    assert cache_reset_url(provider.cache_reset, provider.base_url) == url


def test_an_https_origin_keeps_its_default_port() -> None:
    assert cache_reset_url("vllm", "https://llm.internal/v1") == (
        "https://llm.internal:443/reset_prefix_cache"
    )
    assert same_origin("https://llm.internal:443/x", "https://llm.internal/v1")


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.6:8000/reset",  # another host
        "http://10.0.0.5:8001/reset",  # another port
        "https://10.0.0.5:8000/reset",  # another scheme
        "http://169.254.169.254/latest",  # a metadata address
    ],
)
def test_a_reset_url_off_the_providers_origin_is_refused(url: str) -> None:
    with pytest.raises(ValidationError, match="not on the provider's base_url origin"):
        _provider(cache_reset={"url": url})
    with pytest.raises(ValueError, match="origin"):
        cache_reset_url(CacheResetUrl(url=url), "http://10.0.0.5:8000/v1")


def test_a_hosted_api_is_never_reset() -> None:
    with pytest.raises(ValidationError, match="hosted API"):
        PROVIDER.validate_python({"preset": "groq", "model": "x", "cache_reset": "vllm"})
    for base_url in ("https://api.groq.com/openai/v1", "https://eu.groq.com/v1"):
        with pytest.raises(ValidationError, match="hosted API"):
            _provider(base_url=base_url, cache_reset="vllm")
    # A server of one's own whose name merely resembles a provider's is not hosted.
    assert _provider(base_url="http://groq.internal:8000/v1", cache_reset="vllm").cache_reset
    with pytest.raises(ValidationError, match="hosted API"):
        _provider(
            kind="openai-completions",
            base_url="https://api.together.xyz/v1",
            cache_reset={"url": "https://api.together.xyz/flush"},
        )
    hosted: list[dict[str, Any]] = [
        {"kind": "azure-openai", "model": "m", "api_key_env": "K",
         "endpoint": "https://x.openai.azure.com"},
        {"kind": "bedrock", "model": "m"},
        {"kind": "replicate", "model": "a/b", "api_key_env": "K"},
    ]  # fmt: skip
    for fields in hosted:
        with pytest.raises(ValidationError, match="cache_reset"):
            PROVIDER.validate_python({"name": "h", **fields, "cache_reset": "vllm"})


def test_the_simulator_resets_only_its_own_vllm_route() -> None:
    simulated = PROVIDER.validate_python({"name": "s", "kind": "simulated", "cache_reset": "vllm"})
    assert simulated.cache_reset == "vllm"
    with pytest.raises(ValidationError):
        PROVIDER.validate_python({"name": "s", "kind": "simulated", "cache_reset": "sglang"})
    assert _provider().cache_reset is None
