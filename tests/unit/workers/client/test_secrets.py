"""Secrets bound to hosts (workers/client/secrets.py): the lookup adapters read keys through.

A value is released only for a host its variable is bound to (by a preset, by the
operator, or by the owner of a local run); ``TOKENBENCH*`` variables never; a refusal
names the variable, the host, the hosts it is bound to and the setting that binds it,
and reads nothing from the environment.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from scenarios.model import Scenario
from scenarios.security.host_rules import host_matches
from workers.client.adapters import AdapterContext, ProviderSetupError, build_adapter
from workers.client.adapters.replicate import ReplicateAdapter
from workers.client.errors import ProtocolFailure
from workers.client.secrets import (
    SecretRefused,
    Secrets,
    merge_bindings,
    owner_bindings,
    worker_secrets,
)


class Untouchable(Mapping[str, str]):
    """An environment that fails the test if anything is read from it."""

    def __getitem__(self, key: str) -> str:
        raise AssertionError(f"{key} was read")

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("the environment was listed")

    def __len__(self) -> int:
        return 0


def providers(*entries: dict[str, Any]) -> list[Any]:
    scenario = Scenario.model_validate(
        {
            "name": "t",
            "providers": list(entries),
            "workload": {"mix": [{"prompt_tokens": {"dist": "fixed", "value": 4},
                                  "output_tokens": {"dist": "fixed", "value": 2}}]},
            "load": {"concurrency": [1], "requests_per_level": 1},
        }
    )  # fmt: skip
    return list(scenario.providers)


@pytest.mark.parametrize(
    ("host", "pattern", "matches"),
    [
        ("api.groq.com", "api.groq.com", True),
        ("API.Groq.COM.", "api.groq.com", True),
        ("bedrock-runtime.eu-west-1.amazonaws.com", "bedrock-runtime.*.amazonaws.com", True),
        # `*` is one label: an S3 bucket named "bedrock-runtime.x" does not match.
        ("bedrock-runtime.x.s3.amazonaws.com", "bedrock-runtime.*.amazonaws.com", False),
        ("api.groq.com.evil.example", "api.groq.com", False),
        ("evil-api.groq.com", "api.groq.com", False),
        ("127.0.0.1", "127.0.0.1", True),
        ("::1", "[::1]", True),
    ],
)
def test_host_patterns_match_label_by_label(host: str, pattern: str, matches: bool) -> None:
    assert host_matches(host, pattern) is matches


def test_presets_bind_their_keys_to_their_hosts_only() -> None:
    secrets = worker_secrets({}, "worker w")
    assert secrets.bound_hosts("GROQ_API_KEY") == ("api.groq.com",)
    assert "bedrock-runtime.{aws-region}.amazonaws.com" in secrets.bound_hosts("AWS_ACCESS_KEY_ID")
    assert "stream.replicate.com" in secrets.bound_hosts("REPLICATE_API_TOKEN")
    # The hosted APIs' presets bind their keys to their own API hosts only.
    assert secrets.bound_hosts("OPENAI_API_KEY") == ("api.openai.com",)
    assert secrets.bound_hosts("ANTHROPIC_API_KEY") == ("api.anthropic.com",)
    assert secrets.bound_hosts("GEMINI_API_KEY") == ("generativelanguage.googleapis.com",)
    # Azure resources are per organisation.
    assert secrets.bound_hosts("AZURE_OPENAI_API_KEY") == ()


def test_a_bound_variable_is_released_for_its_host() -> None:
    secrets = Secrets({"MY_KEY": ("vllm.internal.example",)}, {"MY_KEY": "sk-1"}, "worker w")
    assert secrets.get("MY_KEY", "https://VLLM.internal.example/v1", "p") == "sk-1"
    assert secrets.get(None, "https://anything/", "p") is None


def test_an_unbound_host_is_refused_with_everything_needed_to_fix_it() -> None:
    secrets = Secrets({"MY_KEY": ("vllm.internal.example",)}, Untouchable(), "worker w-1")
    with pytest.raises(SecretRefused) as caught:
        secrets.get("MY_KEY", "https://evil.example/v1", "vllm")
    message = str(caught.value)
    assert "provider 'vllm'" in message
    assert "MY_KEY may not be sent to host 'evil.example'" in message
    assert "bound to vllm.internal.example" in message
    assert "worker w-1" in message
    assert """TOKENBENCH__WORKER__SECRET_HOSTS='{"MY_KEY": ["evil.example"]}'""" in message


def test_an_unknown_variable_is_bound_to_no_host() -> None:
    with pytest.raises(SecretRefused, match=r"CANARY_SECRET may not be sent .* bound to no host"):
        Secrets({}, Untouchable()).get("CANARY_SECRET", "http://127.0.0.1:9/", "p")


@pytest.mark.parametrize(
    "variable", ["TOKENBENCH__REDIS__URL", "TOKENBENCH__API__TOKENS", "tokenbench_token"]
)
def test_tokenbench_variables_are_refused_even_when_bound(variable: str) -> None:
    secrets = Secrets({variable: ("*", "http://127.0.0.1:*")}, Untouchable())
    assert secrets.bound_hosts(variable) == ()
    with pytest.raises(SecretRefused, match="tokenbench setting"):
        secrets.get(variable, "http://127.0.0.1:9/", "p")


def test_operator_bindings_add_to_the_presets() -> None:
    secrets = worker_secrets({"GROQ_API_KEY": ["groq-proxy.internal"]}, "w")
    assert secrets.bound_hosts("GROQ_API_KEY") == ("api.groq.com", "groq-proxy.internal")
    assert merge_bindings({"A": ["x"]}, {"A": ["y", "x"], "B": ["z"]}) == {
        "A": ("x", "y"),
        "B": ("z",),
    }


def test_the_owner_of_a_scenario_binds_each_key_to_its_own_providers_hosts() -> None:
    found = owner_bindings(
        providers(
            {"name": "v", "kind": "openai", "base_url": "http://10.0.0.5:8000/v1",
             "model": "m", "api_key_env": "MY_KEY"},
            {"name": "g", "preset": "groq", "model": "llama-3.1-8b-instant"},
            {"name": "b", "kind": "bedrock", "model": "m", "region": "eu-west-1",
             "access_key_id_env": "MY_AWS_ID", "secret_access_key_env": "MY_AWS_SECRET"},
            {"name": "a", "kind": "azure-openai", "model": "m", "api_key_env": "AZ",
             "endpoint": "https://mine.openai.azure.com"},
            {"name": "s", "kind": "simulated"},
        )
    )  # fmt: skip
    assert found == {
        "MY_KEY": ("http://10.0.0.5:8000",),
        "GROQ_API_KEY": ("api.groq.com",),
        "MY_AWS_ID": ("bedrock-runtime.eu-west-1.amazonaws.com",),
        "MY_AWS_SECRET": ("bedrock-runtime.eu-west-1.amazonaws.com",),
        "AZ": ("mine.openai.azure.com",),
    }


# ------------------------------------------------------------------ adapters use the lookup

KINDS: dict[str, dict[str, Any]] = {
    "openai": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m",
               "api_key_env": "CANARY"},
    "openai-completions": {"kind": "openai-completions", "base_url": "http://127.0.0.1:9/v1",
                           "model": "m", "api_key_env": "CANARY"},
    "azure-openai": {"kind": "azure-openai", "endpoint": "http://127.0.0.1:9", "model": "m",
                     "api_key_env": "CANARY"},
    "bedrock-sigv4": {"kind": "bedrock", "endpoint_url": "http://127.0.0.1:9", "model": "m",
                      "access_key_id_env": "CANARY", "secret_access_key_env": "CANARY"},
    "bedrock-session": {"kind": "bedrock", "endpoint_url": "http://127.0.0.1:9", "model": "m",
                        "access_key_id_env": "BOUND", "secret_access_key_env": "BOUND",
                        "session_token_env": "CANARY"},
    "bedrock-key": {"kind": "bedrock", "endpoint_url": "http://127.0.0.1:9", "model": "m",
                    "api_key_env": "CANARY"},
    "tgi": {"kind": "tgi", "base_url": "http://127.0.0.1:9", "api_key_env": "CANARY"},
    "llamacpp": {"kind": "llamacpp", "base_url": "http://127.0.0.1:9", "api_key_env": "CANARY"},
    "replicate": {"kind": "replicate", "base_url": "http://127.0.0.1:9/v1", "model": "a/b",
                  "api_key_env": "CANARY"},
}  # fmt: skip


def build(spec: dict[str, Any], secrets: Secrets) -> Any:
    (provider,) = providers({"name": "p", **spec})
    context = AdapterContext(None, secrets)  # type: ignore[arg-type]  # factories never send
    return asyncio.run(build_adapter(provider, context))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_variable_field_of_every_kind_goes_through_the_lookup(kind: str) -> None:
    secrets = Secrets({"BOUND": ("http://127.0.0.1:9",)}, {"BOUND": "b", "CANARY": "c"}, "worker w")
    with pytest.raises(ProviderSetupError, match=r"CANARY may not be sent to host .127\.0\.0\.1."):
        build(KINDS[kind], secrets)
    bound = Secrets(
        {"BOUND": ("http://127.0.0.1:9",), "CANARY": ("http://127.0.0.1:9",)},
        {"BOUND": "b", "CANARY": "c"},
    )
    assert build(KINDS[kind], bound) is not None


def replicate(secrets: Secrets, base_url: str = "https://api.example/v1") -> ReplicateAdapter:
    adapter = build({**KINDS["replicate"], "base_url": base_url}, secrets)
    assert isinstance(adapter, ReplicateAdapter)
    return adapter


def test_replicate_urls_handed_back_must_be_bound_to_the_key() -> None:
    secrets = Secrets({"CANARY": ("api.example", "stream.example")}, {"CANARY": "c"})
    adapter = replicate(secrets)
    assert (
        adapter.handed_back("https://stream.example/s/1", "stream") == "https://stream.example/s/1"
    )
    with pytest.raises(ProtocolFailure, match=r"stream URL refused: .*.evil\.example."):
        adapter.handed_back("https://evil.example/s/1", "stream")
    with pytest.raises(ProtocolFailure, match="not https"):
        adapter.handed_back("http://stream.example/s/1", "stream")
    with pytest.raises(ProtocolFailure, match="not an http"):
        adapter.handed_back("file:///etc/passwd", "poll")
    with pytest.raises(ProtocolFailure, match="no stream URL"):
        adapter.handed_back(None, "stream")


def test_a_metrics_token_is_bound_to_the_metrics_host_only() -> None:
    vllm = {"name": "v", "kind": "openai", "base_url": "http://10.0.0.5:8000/v1", "model": "m",
            "api_key_env": "API", "metrics_url": "http://10.0.0.6:9400/metrics",
            "metrics_api_key_env": "METRICS"}  # fmt: skip
    same = {**vllm, "name": "w", "metrics_api_key_env": "API"}
    assert owner_bindings(providers(vllm)) == {
        "API": ("http://10.0.0.5:8000",),
        "METRICS": ("http://10.0.0.6:9400",),
    }
    assert owner_bindings(providers(same)) == {
        "API": ("http://10.0.0.5:8000", "http://10.0.0.6:9400")
    }
    (provider,) = providers(vllm)
    assert provider.secret_env_vars() == ["API", "METRICS"]
