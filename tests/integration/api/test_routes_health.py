"""api/rest/routes/health.py through the served app: liveness and readiness without a
token, Prometheus metrics behind one, live workers counted per region."""

from __future__ import annotations

import time

import pytest
import redis

from api.rest.routes import health
from scenarios.wire.contract import heartbeat_key
from tests.integration.api.conftest import (
    EXPECTED_REGION,
    RestStack,
    lonely_region,
    run_scenario,
)

pytestmark = pytest.mark.integration


def test_healthz_and_readyz_answer_without_a_token(rest_stack: RestStack) -> None:
    region = lonely_region()
    client = redis.Redis.from_url(rest_stack.redis_url)
    # Two live workers of one region, as their heartbeats announce them.
    for name in ("w1", "w2"):
        client.set(heartbeat_key(region, name), "{}", ex=60)
    try:
        with rest_stack.anonymous() as anonymous:
            assert anonymous.get("/healthz").json() == {"status": "ok"}
            ready = anonymous.get("/readyz")
    finally:
        client.delete(heartbeat_key(region, "w1"), heartbeat_key(region, "w2"))
        client.close()
    assert ready.status_code == 200, ready.text
    body = ready.json()
    assert body["ready"] is True and body["redis"] is True and body["duckdb"] is True
    assert body["workers"][region] == 2
    # A region the deployment expects is listed even while no worker serves it.
    assert body["workers"][EXPECTED_REGION] == 0


def test_only_metrics_need_a_token(rest_stack: RestStack) -> None:
    with rest_stack.anonymous() as anonymous:
        for route in health.router.routes:
            answer = anonymous.get(route.path)
            assert answer.status_code == (401 if route.path == "/metrics" else 200), route.path


def test_metrics_count_runs_and_shards_in_flight(rest_stack: RestStack) -> None:
    region = lonely_region()
    created = rest_stack.client.post(
        "/v1/runs", json={"scenario": run_scenario(region), "wait_for_workers": True}
    )
    assert created.status_code == 201, created.text
    run_id = created.json()["id"]
    try:
        line = f'tokenbench_shards_in_flight{{region="{region}"}} 1.0'
        deadline = time.monotonic() + 30
        text = ""
        while line not in text:  # the loop dispatches the first stage's shard
            assert time.monotonic() < deadline, text
            answer = rest_stack.client.get("/metrics")
            assert answer.status_code == 200
            assert answer.headers["content-type"].startswith("text/plain")
            text = answer.text
            time.sleep(0.1)
        assert 'tokenbench_runs{state="running"}' in text
        # No worker serves the region: its task waits in the region's queue.
        queued = f'tokenbench_region_queue_depth{{region="{region}"}} 1.0'
        while queued not in text:
            assert time.monotonic() < deadline, text
            time.sleep(0.1)
            text = rest_stack.client.get("/metrics").text
        for family in ("tokenbench_stream_backlog", "tokenbench_requests_recorded"):
            assert f"# TYPE {family} gauge" in text
    finally:
        rest_stack.client.post(f"/v1/runs/{run_id}/cancel")
