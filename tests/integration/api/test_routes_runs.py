"""api/rest/routes/runs.py through the served app: a run created from an inline or a
stored scenario (with overrides), dispatched to its region's queue, followed, read
(report, records) and cancelled; every refusal with its status and field."""

from __future__ import annotations

import io
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import redis

from api.rest.routes import runs
from scenarios.wire.contract import cancel_key, region_queue, shard_task_id
from tests.integration.api.conftest import RestStack, lonely_region, run_scenario

pytestmark = pytest.mark.integration


def _wait_queued(redis_url: str, region: str, task_id: str) -> None:
    """Until the shard's task waits in its region's queue (the loop dispatches it)."""
    client = redis.Redis.from_url(redis_url)
    try:
        deadline = time.monotonic() + 30
        while not any(
            task_id.encode() in entry for entry in client.lrange(region_queue(region), 0, -1)
        ):
            assert time.monotonic() < deadline, f"task {task_id} never queued"
            time.sleep(0.05)
    finally:
        client.close()


def test_a_run_is_dispatched_followed_read_and_cancelled(rest_stack: RestStack) -> None:
    client = rest_stack.client
    region = lonely_region()
    created = client.post(
        "/v1/runs", json={"scenario": run_scenario(region, levels=(1, 2)), "wait_for_workers": True}
    )
    assert created.status_code == 201, created.text
    assert created.json()["state"] == "running"
    assert (created.json()["stages"], created.json()["shards"]) == (2, 2)
    run_id = created.json()["id"]

    view = client.get(f"/v1/runs/{run_id}").json()
    assert view["id"] == run_id and view["state"] == "running"
    assert view["created_at"] is not None  # the live view carries the stored creation time
    assert view["requests_planned"] == 6 and view["requests_done"] == 0
    assert [s["concurrency"] for s in view["stages"]] == [1, 2]
    first = view["stages"][0]["shards"][0]
    _wait_queued(rest_stack.redis_url, region, shard_task_id(run_id, first["shard_id"]))
    assert client.get(f"/v1/runs/{run_id}").json()["stages"][1]["state"] == "planned"
    assert client.get("/v1/runs", params={"limit": 1}).json()[0]["id"] == run_id

    report = client.get(f"/v1/runs/{run_id}/report")
    assert report.status_code == 200
    assert (report.json()["run_id"], report.json()["state"]) == (run_id, "running")

    # No request recorded yet: an empty table, with the records' columns.
    arrow = client.get(f"/v1/runs/{run_id}/records", headers={"accept": runs.ARROW_STREAM})
    assert arrow.headers["content-type"] == runs.ARROW_STREAM
    table = pa.ipc.open_stream(arrow.content).read_all()
    assert table.num_rows == 0 and "ttft_ms" in table.column_names
    parquet = client.get(f"/v1/runs/{run_id}/records", headers={"accept": runs.PARQUET})
    assert parquet.headers["content-type"] == runs.PARQUET
    assert pq.read_table(io.BytesIO(parquet.content)).schema.names == table.column_names

    cancelled = client.post(f"/v1/runs/{run_id}/cancel")
    assert cancelled.status_code == 202
    assert cancelled.json()["id"] == run_id
    # Workers learn it from Redis: a task started later skips itself.
    with redis.Redis.from_url(rest_stack.redis_url) as direct:
        assert direct.exists(cancel_key(run_id)) == 1


def test_a_stored_scenario_runs_with_overrides(rest_stack: RestStack) -> None:
    client = rest_stack.client
    stored = client.post("/v1/scenarios", json=run_scenario(lonely_region(), levels=(1, 2)))
    region = lonely_region()
    created = client.post(
        "/v1/runs",
        json={
            "scenario_id": stored.json()["id"],
            "overrides": {"regions": [region], "concurrency": [3], "requests_per_level": 5},
            "wait_for_workers": True,
        },
    )
    assert created.status_code == 201, created.text
    assert (created.json()["stages"], created.json()["shards"]) == (1, 1)
    run_id = created.json()["id"]
    view = client.get(f"/v1/runs/{run_id}").json()
    assert view["requests_planned"] == 5
    assert view["stages"][0]["concurrency"] == 3
    assert view["stages"][0]["shards"][0]["region"] == region
    client.post(f"/v1/runs/{run_id}/cancel")


def test_overrides_swap_the_loop_shape_as_the_command_line_does(rest_stack: RestStack) -> None:
    """Concurrency levels over an open-loop scenario make it closed-loop (and rates over
    a closed-loop one open-loop), as ``tokenbench run --concurrency/--rate`` do: before
    scenarios/overrides.py the REST path kept load.rate and answered 422 "not both"."""
    client = rest_stack.client
    region = lonely_region()
    open_loop = run_scenario(region)
    open_loop["load"] = {"rate": {"rps": [2.0], "arrival": "constant"}, "requests_per_level": 3}
    closed = client.post(
        "/v1/runs",
        json={"scenario": open_loop, "overrides": {"concurrency": [2]}, "wait_for_workers": True},
    )
    assert closed.status_code == 201, closed.text
    view = client.get(f"/v1/runs/{closed.json()['id']}").json()
    assert view["stages"][0]["concurrency"] == 2 and view["stages"][0]["rate"] is None
    client.post(f"/v1/runs/{closed.json()['id']}/cancel")
    opened = client.post(
        "/v1/runs",
        json={
            "scenario": run_scenario(region),
            "overrides": {"rps": [4.0]},
            "wait_for_workers": True,
        },
    )
    assert opened.status_code == 201, opened.text
    view = client.get(f"/v1/runs/{opened.json()['id']}").json()
    assert [stage["rate"] for stage in view["stages"]] == [4.0]
    client.post(f"/v1/runs/{opened.json()['id']}/cancel")
    both = client.post(
        "/v1/runs",
        json={"scenario": open_loop, "overrides": {"concurrency": [2], "rps": [1.0]}},
    )
    assert both.status_code == 422
    assert both.json()["detail"][0]["loc"][:2] == ["body", "overrides"]


def test_refusals_name_the_problem(rest_stack: RestStack) -> None:
    client = rest_stack.client
    region = lonely_region()
    stored = client.post("/v1/scenarios", json=run_scenario(region)).json()["id"]
    for body in ({}, {"scenario_id": stored, "scenario": run_scenario(region)}):
        answer = client.post("/v1/runs", json=body)
        assert answer.status_code == 422
        assert "exactly one of scenario_id and scenario" in answer.json()["detail"][0]["msg"]

    # No live worker in the region, and the run was not asked to wait for one.
    busy = client.post("/v1/runs", json={"scenario": run_scenario(region)})
    assert busy.status_code == 409
    assert busy.json()["regions"] == [region]
    assert busy.json()["error"] == "conflict"

    for path in ("", "/report", "/records"):
        assert client.get(f"/v1/runs/no-such-run{path}").status_code == 404, path
    assert client.post("/v1/runs/no-such-run/cancel").status_code == 404
    assert client.get("/v1/runs", params={"limit": 0}).status_code == 422
    assert client.get("/v1/runs/x/records", params={"format": "csv"}).status_code == 422
    with rest_stack.anonymous() as anonymous:
        assert anonymous.get("/v1/runs").status_code == 401
