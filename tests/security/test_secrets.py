"""Secrets bound to hosts (issue: send any environment variable of a worker to any URL).

The worker of the hostile stack holds canary secrets; only ``BOUND_TEST_KEY`` is bound
(to 127.0.0.1, where the catcher listens). A REST submitter naming any other variable
(the service's own ``TOKENBENCH__*`` settings, an arbitrary secret, or a real provider
key such as ``OPENAI_API_KEY`` or ``GROQ_API_KEY``, which is bound to its provider's
host only) with a URL at the attacker's catcher gets a failed shard whose message names
the variable and the host, and the catcher receives nothing at all.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import CliResult
from tests.fakes.catcher import Catcher
from tests.security.conftest import HostileStack, scenario_with

pytestmark = pytest.mark.integration

# The reproductions, then variables of our own: the service's settings, an
# arbitrary secret, real provider keys bound elsewhere, Bedrock's and Replicate's.
ATTACK_VARIABLES = [
    "TOKENBENCH__REDIS__URL",
    "TOKENBENCH__API__TOKENS",
    "CANARY_SECRET",
    "OPENAI_API_KEY",
    "GROQ_API_KEY",
    "AWS_SECRET_ACCESS_KEY",
    "REPLICATE_API_TOKEN",
    "TOKENBENCH_WORKER_NAME",
    "PATH",
]


def submit(stack: HostileStack, scenario: dict[str, Any]) -> dict[str, Any]:
    """Start a run over REST and return its view once it ended."""
    created = stack.client.post("/v1/runs", json={"scenario": scenario})
    assert created.status_code == 201, created.text
    return stack.wait_for_run(created.json()["id"])


def shards(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The run's shards by provider name."""
    return {s["provider"]: s for stage in view["stages"] for s in stage["shards"]}


def assert_refused(shard: dict[str, Any], variable: str, host: str = "127.0.0.1") -> None:
    assert shard["state"] == "failed", shard
    message = shard["message"] or ""
    assert variable in message and f"'{host}'" in message, message
    if not variable.startswith("TOKENBENCH"):
        assert "TOKENBENCH__WORKER__SECRET_HOSTS" in message, message
    assert shard["requests_done"] == 0


def assert_nothing_caught(stack: HostileStack, catcher: Catcher) -> None:
    received = catcher.received()
    assert stack.canaries_in(received) == []
    assert catcher.requests == [], received[:500]


@pytest.mark.parametrize("variable", ATTACK_VARIABLES)
def test_a_variable_not_bound_to_the_host_is_never_sent(
    hostile_stack: HostileStack, catcher: Catcher, variable: str
) -> None:
    thief = {
        "name": "thief",
        "kind": "openai",
        "base_url": f"{catcher.url}/v1",
        "model": "m",
        "api_key_env": variable,
    }
    view = submit(hostile_stack, scenario_with(thief))
    assert view["state"] == "failed"
    assert_refused(shards(view)["thief"], variable)
    assert_nothing_caught(hostile_stack, catcher)
    hostile_stack.assert_healthy()


def test_every_field_naming_a_variable_is_bound(
    hostile_stack: HostileStack, catcher: Catcher
) -> None:
    # One provider per kind and per variable field, all at the catcher, in one run.
    base = catcher.url
    providers = [
        {"name": "completions", "kind": "openai-completions", "base_url": f"{base}/v1",
         "model": "m", "api_key_env": "CANARY_SECRET"},
        {"name": "azure", "kind": "azure-openai", "endpoint": base, "model": "m",
         "api_key_env": "OPENAI_API_KEY"},
        {"name": "tgi", "kind": "tgi", "base_url": base, "api_key_env": "CANARY_SECRET"},
        {"name": "llamacpp", "kind": "llamacpp", "base_url": base,
         "api_key_env": "TOKENBENCH__API__TOKENS"},
        {"name": "replicate", "kind": "replicate", "base_url": f"{base}/v1", "model": "a/b",
         "api_key_env": "REPLICATE_API_TOKEN"},
        # Bedrock: the key id travels in the SigV4 Credential= field.
        {"name": "bedrock-sigv4", "kind": "bedrock", "model": "m", "endpoint_url": base},
        {"name": "bedrock-session", "kind": "bedrock", "model": "m", "endpoint_url": base,
         "access_key_id_env": "BOUND_TEST_KEY", "secret_access_key_env": "BOUND_TEST_KEY",
         "session_token_env": "CANARY_SECRET"},
        {"name": "bedrock-key", "kind": "bedrock", "model": "m", "endpoint_url": base,
         "api_key_env": "GROQ_API_KEY"},
        {"name": "groq-preset", "preset": "groq", "model": "llama-3.1-8b-instant",
         "base_url": f"{base}/openai/v1"},
    ]  # fmt: skip
    view = submit(hostile_stack, scenario_with(*providers))
    found = shards(view)
    expected = {
        "completions": "CANARY_SECRET",
        "azure": "OPENAI_API_KEY",
        "tgi": "CANARY_SECRET",
        "llamacpp": "TOKENBENCH__API__TOKENS",
        "replicate": "REPLICATE_API_TOKEN",
        "bedrock-sigv4": "AWS_ACCESS_KEY_ID",
        "bedrock-session": "CANARY_SECRET",
        "bedrock-key": "GROQ_API_KEY",
        "groq-preset": "GROQ_API_KEY",
    }
    for name, variable in expected.items():
        assert_refused(found[name], variable)
    assert_nothing_caught(hostile_stack, catcher)
    hostile_stack.assert_healthy()


def test_a_bound_variable_reaches_its_host(hostile_stack: HostileStack, catcher: Catcher) -> None:
    # Positive control: the binding works, so the refusals above are the bindings at work.
    bound = {
        "name": "bound",
        "kind": "openai",
        "base_url": f"{catcher.url}/v1",
        "model": "m",
        "api_key_env": "BOUND_TEST_KEY",
    }
    view = submit(hostile_stack, scenario_with(bound, requests=3))
    assert view["state"] == "finished", view
    assert view["requests_done"] == 3 and view["errors"] == 0
    assert hostile_stack.canaries_in(catcher.received()) == ["BOUND_TEST_KEY"]
    hostile_stack.assert_healthy()


def test_a_bound_variable_is_refused_on_another_host_name_of_the_same_address(
    hostile_stack: HostileStack,
) -> None:
    # Bound to the host 127.0.0.1; "localhost" is another host, even if it resolves there.
    other = Catcher(host="localhost").start()
    try:
        thief = {
            "name": "thief",
            "kind": "openai",
            "base_url": f"{other.url}/v1",
            "model": "m",
            "api_key_env": "BOUND_TEST_KEY",
        }
        view = submit(hostile_stack, scenario_with(thief))
        assert_refused(shards(view)["thief"], "BOUND_TEST_KEY", host="localhost")
        assert_nothing_caught(hostile_stack, other)
    finally:
        other.stop()
    hostile_stack.assert_healthy()


def test_secrets_are_not_sent_along_a_redirect(
    hostile_stack: HostileStack, catcher: Catcher
) -> None:
    # The bound host answers 307 to the attacker's other host: never followed.
    other = Catcher(host="localhost").start()
    try:
        target = f"{other.url}/v1"
        bound = {
            "name": "redirected",
            "kind": "openai",
            "base_url": f"{catcher.url}/redirect?to={target}",
            "model": "m",
            "api_key_env": "BOUND_TEST_KEY",
        }
        view = submit(hostile_stack, scenario_with(bound, requests=2))
        assert view["state"] == "finished", view
        assert view["requests_done"] == 2 and view["errors"] == 2
        assert other.requests == []
        assert len(catcher.requests) == 2  # the bound host itself, once per request
    finally:
        other.stop()
    hostile_stack.assert_healthy()


def _local_scenario(base_url: str, variable: str) -> dict[str, Any]:
    return {
        "name": "mine",
        "providers": [
            {"name": "mine", "kind": "openai", "base_url": base_url, "model": "simulated",
             "api_key_env": variable}
        ],
        "workload": {"mix": [{"prompt_tokens": {"dist": "fixed", "value": 4},
                              "output_tokens": {"dist": "fixed", "value": 2}}]},
        "load": {"concurrency": [1], "requests_per_level": 3},
    }  # fmt: skip


def test_local_run_binds_its_own_scenarios_keys_without_configuration(
    tmp_path: Path,
    simulate_endpoint: Callable[..., str],
    tokenbench: Callable[..., CliResult],
) -> None:
    # The local user owns the machine: `tokenbench run` on the embedded default sends
    # the scenario's own key to the scenario's own host with no binding configured,
    # while a tokenbench setting named as a key is still refused, before anything starts.
    base_url = simulate_endpoint(ttft_ms=2, itl_ms=1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH")}
    env["MY_LOCAL_KEY"] = "sk-local-owner-key-1234"
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(_local_scenario(base_url, "MY_LOCAL_KEY")))
    result = tokenbench("run", str(path), "--db", str(tmp_path / "m.duckdb"), env=env)
    assert result.code == 0, result.stdout + result.stderr
    assert "sk-local-owner-key" not in result.stdout + result.stderr

    path.write_text(yaml.safe_dump(_local_scenario(base_url, "TOKENBENCH__API__TOKENS")))
    env["TOKENBENCH__API__TOKENS"] = '["local-token"]'
    refused = tokenbench("run", str(path), "--db", str(tmp_path / "n.duckdb"), env=env)
    assert refused.code == 2, refused.stdout + refused.stderr
    assert "TOKENBENCH__API__TOKENS is a tokenbench setting" in refused.stderr
    assert "Traceback" not in refused.stderr
