"""Server timings end to end (docs/traces.md): a run against the batching simulator,
which exports a vLLM-style span per answer to the control plane's OTLP receiver; the
report joins them to the records on the stream's id and splits TTFT into server
queue, server prefill and network + client. Six users on a batch of two queue; one
does not: the high stage's queue time is above the low stage's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from api.local.redis_server import RedisServer
from tests.conftest import API_TOKEN, Proc, start_control_plane, start_worker, wait_for_run
from tests.support.polls import wait_until

pytestmark = pytest.mark.integration

REGION = "otlp"
TOKEN_ENV = "TOKENBENCH_OTLP_TOKEN"
LEVELS = [1, 6]


@pytest.fixture(scope="module")
def stack(
    redis_server: RedisServer,
    worker_env: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, httpx.Client]]:
    tmp = tmp_path_factory.mktemp("otlp-e2e")
    # The worker's simulator sends its spans with this (admin) token.
    worker: Proc = start_worker(
        REGION, {**worker_env, TOKEN_ENV: API_TOKEN}, tmp / "worker.log", redis_server.url
    )
    plane, base = start_control_plane(worker_env, tmp / "api.duckdb", tmp / "api.log")
    headers = {"authorization": f"Bearer {API_TOKEN}"}
    with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
        yield base, client
    plane.stop()
    worker.stop(3)


def _scenario(base: str) -> dict[str, Any]:
    return {
        "name": "server-timings",
        "seed": 5,
        "providers": [
            {
                "name": "vllm-sim",
                "kind": "simulated",
                "simulate": {
                    "model": "llama-3.1-8b",
                    "max_batch": 2,
                    "otlp_traces_url": f"{base}/v1/otlp/v1/traces",
                    "otlp_token_env": TOKEN_ENV,
                    "otlp_service_name": "vllm-sim",
                },
            }
        ],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 64},
                    "output_tokens": {"dist": "fixed", "value": 48},
                }
            ]
        },
        "load": {"concurrency": LEVELS, "requests_per_level": 36},
        "regions": [REGION],
    }


def test_spans_join_and_queue_time_grows_with_load(stack: tuple[str, httpx.Client]) -> None:
    base, client = stack
    created = client.post("/v1/runs", json={"scenario": _scenario(base)})
    assert created.status_code == 201, created.text
    run_id = created.json()["id"]
    assert wait_for_run(client, run_id)["state"] == "finished"

    def report() -> dict[str, Any]:
        answer = client.get(f"/v1/runs/{run_id}/report")
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    # Spans are exported in the background (every half second): wait for the last ones.
    wait_until(
        lambda: all(r["joined_share"] >= 0.9 for r in report()["server_timings"]),
        30,
        "spans joined",
    )
    rows = {r["stage"]: r for r in report()["server_timings"]}
    assert sorted(rows) == [0, 1]
    for row in rows.values():
        print(
            f"stage {row['stage']}: joined {row['joined']}/{row['requests']}, "
            f"queue p50 {row['queue_p50_ms']:.2f} ms p99 {row['queue_p99_ms']:.2f} ms, "
            f"prefill p50 {row['prefill_p50_ms']:.2f} ms, "
            f"network+client p50 {row['network_client_p50_ms']:.2f} ms "
            f"p99 {row['network_client_p99_ms']:.2f} ms, TTFT p50 {row['client_ttft_p50_ms']:.2f} ms"
        )
        assert row["requests"] == 36
        assert row["prefill_p50_ms"] > 0
        # The client cannot see its first token before the server sent it.
        assert row["network_client_p50_ms"] >= 0
    low, high = rows[0], rows[1]
    assert high["queue_p50_ms"] > 0
    assert high["queue_p50_ms"] > low["queue_p50_ms"]
    assert high["queue_p99_ms"] > 2 * max(low["queue_p99_ms"], 0.1)
    # The report's section and chart show it.
    markdown = client.get(f"/v1/runs/{run_id}/report", params={"format": "markdown"})
    assert "Where the first token's time goes" in markdown.text
    html = client.get(f"/v1/runs/{run_id}/report", params={"format": "html"})
    assert html.status_code == 200 and 'id="chart-ttft-decomposition"' in html.text
