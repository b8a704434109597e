"""Nothing lost, nothing doubled: a worker SIGKILLed mid-shard, a control plane restarted."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
import redis

from api.local.redis_server import RedisServer
from scenarios.wire.contract import heartbeat_key
from tests.conftest import API_TOKEN, start_control_plane, start_worker
from tests.support.polls import wait_for_view

pytestmark = pytest.mark.integration


def long_scenario(region: str, requests: int) -> dict[str, Any]:
    return {
        "name": "recovery",
        "providers": [
            {"name": "sim", "kind": "simulated", "simulate": {"ttft_ms": 30, "itl_ms": 10}}
        ],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 8},
                    "output_tokens": {"dist": "fixed", "value": 20},
                }
            ]
        },
        "load": {"concurrency": [2], "requests_per_level": requests},
        "regions": [region],
    }


def client_for(base: str) -> httpx.Client:
    return httpx.Client(base_url=base, headers={"authorization": f"Bearer {API_TOKEN}"}, timeout=30)


def test_worker_killed_mid_shard_is_rerun_once_elsewhere(
    tmp_path: Path, redis_server: RedisServer, worker_env: dict[str, str]
) -> None:
    env = {**worker_env, "TOKENBENCH__WORKER__HEARTBEAT_S": "1"}
    workers = [
        start_worker("kill", env, tmp_path / f"w{i}.log", redis_server.url) for i in range(2)
    ]
    plane, base = start_control_plane(env, tmp_path / "kill.duckdb", tmp_path / "plane.log")
    try:
        with client_for(base) as client:
            run_id = client.post("/v1/runs", json={"scenario": long_scenario("kill", 60)}).json()[
                "id"
            ]
            shard = wait_for_view(
                client, run_id, lambda v: v["stages"][0]["shards"][0]["requests_done"] >= 6
            )["stages"][0]["shards"][0]
            assert shard["attempt"] == 1
            # Find the worker executing the shard from its heartbeat, and SIGKILL it.
            owner = redis.Redis.from_url(redis_server.url).get(
                f"tokenbench:run:{run_id}:shard:{shard['shard_id']}:owner"
            )
            assert owner is not None
            beat = redis.Redis.from_url(redis_server.url).get(heartbeat_key("kill", owner.decode()))
            assert beat is not None
            victim_pid = json.loads(beat)["pid"]
            os.kill(victim_pid, signal.SIGKILL)
            view = wait_for_view(client, run_id, lambda v: v["state"] != "running", timeout_s=180)
            assert view["state"] == "finished", view
            report = client.get(f"/v1/runs/{run_id}/report").json()
    finally:
        plane.stop()
        for worker in workers:
            worker.stop(signal.SIGKILL)

    (row,) = report["shards"]
    assert row["attempts"] == 2 and row["accepted_attempt"] == 2
    con = duckdb.connect(str(tmp_path / "kill.duckdb"), read_only=True)
    # Exactly one set of records: every sequence number once, all from the accepted attempt.
    seqs = con.execute(
        "SELECT seq, attempt FROM requests WHERE run_id = ? ORDER BY seq", [run_id]
    ).fetchall()
    assert [s for s, _ in seqs] == list(range(60))
    assert {a for _, a in seqs} == {2}
    attempts = dict(
        con.execute(
            "SELECT attempt, state FROM shard_attempts WHERE run_id = ?", [run_id]
        ).fetchall()
    )
    assert attempts == {1: "abandoned", 2: "finished"}
    # The abandoned attempt's records are kept apart, not mixed in.
    partial = con.execute(
        "SELECT count(*) FROM request_records WHERE run_id = ? AND attempt = 1", [run_id]
    ).fetchone()
    assert partial is not None and partial[0] > 0


def test_control_plane_restart_mid_run_loses_and_doubles_nothing(
    tmp_path: Path, redis_server: RedisServer, worker_env: dict[str, str]
) -> None:
    worker = start_worker("restart", worker_env, tmp_path / "w.log", redis_server.url)
    db = tmp_path / "restart.duckdb"
    # The run is planned with one stream per shard (every level split into parts); the
    # restarted plane has the default setting, and goes on with the stored plan.
    split_env = {**worker_env, "TOKENBENCH__CONTROL__MAX_STREAMS_PER_SHARD": "1"}
    plane, base = start_control_plane(split_env, db, tmp_path / "plane1.log")
    try:
        scenario = long_scenario("restart", 40)
        scenario["load"]["concurrency"] = [2, 4]
        with client_for(base) as client:
            run_id = client.post("/v1/runs", json={"scenario": scenario}).json()["id"]
            wait_for_view(client, run_id, lambda v: v["requests_done"] >= 8)
        plane.stop(signal.SIGKILL)  # no chance to acknowledge or flush anything
        time.sleep(2)  # workers keep publishing into the streams meanwhile
        plane, base = start_control_plane(worker_env, db, tmp_path / "plane2.log")
        with client_for(base) as client:
            view = wait_for_view(client, run_id, lambda v: v["state"] != "running", timeout_s=180)
        assert view["state"] == "finished", view
    finally:
        plane.stop()
        worker.stop(signal.SIGQUIT)
    assert [(s["concurrency"], len(s["shards"])) for s in view["stages"]] == [(2, 2), (4, 4)]
    assert {shard["concurrency"] for s in view["stages"] for shard in s["shards"]} == {1}
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute(
        "SELECT stage, seq FROM requests WHERE run_id = ? ORDER BY stage, seq", [run_id]
    ).fetchall()
    assert rows == [(stage, seq) for stage in (0, 1) for seq in range(40)]
    stored = con.execute(
        "SELECT count(*) FROM request_records WHERE run_id = ?", [run_id]
    ).fetchone()
    assert stored == (80,)
