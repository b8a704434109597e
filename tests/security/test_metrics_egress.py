"""A provider's ``metrics_url`` is a URL the worker opens, like ``base_url``: over REST a
refused one is a 422 at its field; a metrics token goes only to a host its variable is
bound to (else the scrape is a recorded error and nothing is sent); the run's requests
are measured whatever the telemetry did. docs/telemetry.md, docs/security.md."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.catcher import Catcher
from tests.security.conftest import HostileStack, scenario_with, simulated

pytestmark = pytest.mark.integration

# Metadata and management addresses in a few spellings (tests/security/test_egress.py
# has them all, for base_url; the check is the same function).
FORBIDDEN_BASES = [
    "http://[::ffff:169.254.169.254]",
    "http://168.63.129.16",
    "http://[fd00:ec2::254]",
    "http://[64:ff9b::a9fe:a9fe]",
    "http://2852039166",
    "http://169.254.169.254.",
]

VLLM_TEXT = (
    b"# TYPE vllm:num_requests_running gauge\n"
    b'vllm:num_requests_running{model_name="m"} 1.0\n'
    b'vllm:num_requests_waiting{model_name="m"} 0.0\n'
)


def assert_refused_at(answer: Any, path: list[Any]) -> None:
    assert answer.status_code == 422, answer.text
    detail = answer.json()["detail"]
    assert [d["loc"] for d in detail] == [path], detail
    assert "refused" in detail[0]["msg"]
    assert "Traceback" not in answer.text


@pytest.mark.parametrize("base", FORBIDDEN_BASES)
@pytest.mark.parametrize(
    "provider",
    [
        {"kind": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"},
        {"kind": "openai-completions", "model": "m", "base_url": "http://127.0.0.1:9/v1"},
        {"kind": "tgi", "base_url": "http://127.0.0.1:9"},
        {"kind": "llamacpp", "base_url": "http://127.0.0.1:9"},
    ],
)
def test_a_refused_metrics_url_is_a_422_at_its_field(
    hostile_stack: HostileStack, base: str, provider: dict[str, Any]
) -> None:
    scenario = scenario_with(
        simulated(), {"name": "meta", **provider, "metrics_url": f"{base}/metrics"}
    )
    path = ["scenario", "providers", 1, "metrics_url"]
    assert_refused_at(hostile_stack.client.post("/v1/runs", json={"scenario": scenario}), path)
    assert_refused_at(hostile_stack.client.post("/v1/scenarios", json=scenario), path)
    hostile_stack.assert_healthy()


@pytest.mark.parametrize(
    "provider",
    [
        {"kind": "simulated", "metrics_url": "http://127.0.0.1:9/metrics"},  # a path only
        {"kind": "azure-openai", "model": "m", "api_key_env": "K",
         "endpoint": "https://x.openai.azure.com", "metrics_url": "https://x/metrics"},
        {"kind": "replicate", "model": "a/b", "api_key_env": "K",
         "metrics_url": "https://x/metrics"},
    ],
)  # fmt: skip
def test_metrics_url_is_only_for_servers_the_user_runs(
    hostile_stack: HostileStack, provider: dict[str, Any]
) -> None:
    answer = hostile_stack.client.post(
        "/v1/runs", json={"scenario": scenario_with({"name": "p", **provider})}
    )
    assert answer.status_code == 422, answer.text
    locs = [d["loc"] for d in answer.json()["detail"]]
    assert ["scenario", "providers", 0, "metrics_url"] in [loc[:4] for loc in locs], locs
    hostile_stack.assert_healthy()


def _scrapes(stack: HostileStack, run_id: str) -> list[dict[str, Any]]:
    answer = stack.client.post(
        "/v1/sql",
        json={
            "query": "SELECT status, error_message, series FROM server_metric_scrapes "
            f"WHERE run_id = '{run_id}' ORDER BY scrape_seq",
            "max_staleness_s": 0,
        },
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    names = [c if isinstance(c, str) else c["name"] for c in body["columns"]]
    return [
        row if isinstance(row, dict) else dict(zip(names, row, strict=True)) for row in body["rows"]
    ]


def _provider(catcher: Catcher, token_env: str) -> dict[str, Any]:
    return {
        "name": "vllm",
        "kind": "openai",
        "base_url": f"{catcher.url}/v1",
        "model": "m",
        "metrics_url": f"{catcher.url}/metrics",
        "metrics_api_key_env": token_env,
    }


def test_an_unbound_metrics_token_is_never_sent(
    hostile_stack: HostileStack, catcher: Catcher
) -> None:
    catcher.answer("/metrics", VLLM_TEXT, content_type="text/plain; version=0.0.4")
    created = hostile_stack.client.post(
        "/v1/runs", json={"scenario": scenario_with(_provider(catcher, "CANARY_SECRET"))}
    )
    assert created.status_code == 201, created.text
    view = hostile_stack.wait_for_run(created.json()["id"])
    assert view["state"] == "finished", view
    assert view["requests_done"] == 2 and view["errors"] == 0  # measured all the same
    scrapes = _scrapes(hostile_stack, view["id"])
    assert [s["status"] for s in scrapes] == ["error"], scrapes
    assert "CANARY_SECRET may not be sent" in scrapes[0]["error_message"]
    assert not [r for r in catcher.requests if r.path.startswith("/metrics")]
    assert hostile_stack.canaries_in(catcher.received()) == []
    hostile_stack.assert_healthy()


def test_a_bound_metrics_token_is_sent_to_its_host(
    hostile_stack: HostileStack, catcher: Catcher
) -> None:
    catcher.answer("/metrics", VLLM_TEXT, content_type="text/plain; version=0.0.4")
    created = hostile_stack.client.post(
        "/v1/runs", json={"scenario": scenario_with(_provider(catcher, "BOUND_TEST_KEY"))}
    )
    assert created.status_code == 201, created.text
    view = hostile_stack.wait_for_run(created.json()["id"])
    assert view["state"] == "finished", view
    scrapes = _scrapes(hostile_stack, view["id"])
    assert scrapes and all(s["status"] == "ok" and s["series"] == 2 for s in scrapes), scrapes
    scraped = [r for r in catcher.requests if r.path.startswith("/metrics")]
    assert len(scraped) == len(scrapes)
    assert all(
        r.headers.get("authorization") == "Bearer sk-canary-bound-test-66aa" for r in scraped
    )
    hostile_stack.assert_healthy()
