"""A cache reset is a POST the worker sends before each stage: over REST it is refused
for a hosted API (a preset, a base_url on a preset's hosts, the hosted kinds) and for a
URL off the provider's own origin, a 422 at the provider with the reason, never a
traceback and never a request (docs/providers.md, "Cache reset")."""

from __future__ import annotations

from typing import Any

import pytest

from tests.security.conftest import HostileStack, scenario_with, simulated

pytestmark = pytest.mark.integration

SERVER = {"kind": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}


@pytest.mark.parametrize(
    ("provider", "reason"),
    [
        ({"preset": "groq", "model": "llama-3.1-8b-instant", "cache_reset": "vllm"}, "hosted API"),
        ({"preset": "together", "model": "m", "cache_reset": {"url": "https://api.together.xyz/r"}},
         "hosted API"),
        ({"kind": "openai", "model": "m", "base_url": "https://api.fireworks.ai/inference/v1",
          "cache_reset": "sglang"}, "hosted API"),
        ({"kind": "openai", "model": "m", "base_url": "https://x.groq.com/v1",
          "cache_reset": "vllm"}, "hosted API"),
        ({**SERVER, "cache_reset": {"url": "http://169.254.169.254/latest/meta-data"}}, "origin"),
        ({**SERVER, "cache_reset": {"url": "http://127.0.0.1:10/reset_prefix_cache"}}, "origin"),
        ({**SERVER, "cache_reset": {"url": "http://127.0.0.1.nip.io:9/reset"}}, "origin"),
        ({"kind": "azure-openai", "model": "m", "api_key_env": "K",
          "endpoint": "https://x.openai.azure.com", "cache_reset": "vllm"}, "cache_reset"),
        ({"kind": "replicate", "model": "a/b", "api_key_env": "K", "cache_reset": "vllm"},
         "cache_reset"),
        ({"kind": "bedrock", "model": "m", "cache_reset": "vllm"}, "cache_reset"),
    ],
)  # fmt: skip
def test_a_cache_reset_for_a_hosted_api_or_off_the_providers_origin_is_refused(
    hostile_stack: HostileStack, provider: dict[str, Any], reason: str
) -> None:
    scenario = scenario_with(simulated(), {"name": "target", **provider})
    for answer in (
        hostile_stack.client.post("/v1/runs", json={"scenario": scenario}),
        hostile_stack.client.post("/v1/scenarios", json=scenario),
    ):
        assert answer.status_code == 422, answer.text
        detail = answer.json()["detail"]
        assert all(d["loc"][:3] == ["scenario", "providers", 1] or d["loc"][:2] == ["providers", 1]
                   for d in detail), detail  # fmt: skip
        assert reason in answer.text
        assert "Traceback" not in answer.text
    hostile_stack.assert_healthy()


def test_a_cache_reset_on_the_providers_own_server_is_accepted(
    hostile_stack: HostileStack,
) -> None:
    own = {"name": "own", **SERVER, "cache_reset": {"url": "http://127.0.0.1:9/reset_prefix_cache"}}
    stored = hostile_stack.client.post("/v1/scenarios", json=scenario_with(simulated(), own))
    assert stored.status_code == 201, stored.text
