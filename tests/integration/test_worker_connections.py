"""A real worker's connections and descriptors, run after run (workers/client/prewarm.py,
workers/client/transport/pool.py, workers/runtime/fd_budget.py).

A run that opened thousands of connections to the simulator leaves none of them open on
the worker once it finished, and a worker whose descriptor budget a shard does not fit
refuses that shard with its need and the budget, then serves the next run normally.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from api.local.redis_server import RedisServer
from scenarios.wire.contract import heartbeat_pattern
from tests.conftest import API_TOKEN, REPO, Proc, start_control_plane, start_worker, wait_for_run
from tests.support.descriptors import settle, sockets_of

pytestmark = pytest.mark.integration

# Sockets a worker may hold beyond its baseline once a run is over (its Redis pool).
SLACK = 16
# The open-file limit of the starved worker: its budget is this less what it holds at
# rest (~40) less the 256 reserved, far below a 500-stream shard.
STARVED_NOFILE = 400


def _scenario(region: str, concurrency: int, requests: int) -> dict[str, Any]:
    return {
        "name": "connections",
        "providers": [
            {"name": "sim", "kind": "simulated", "simulate": {"ttft_ms": 5, "itl_ms": 1}}
        ],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 4},
                    "output_tokens": {"dist": "fixed", "value": 2},
                }
            ]
        },
        "load": {"concurrency": [concurrency], "requests_per_level": requests},
        "regions": [region],
    }


def _starved_worker(region: str, env: dict[str, str], log: Path, redis_url: str) -> Proc:
    """A worker process whose soft RLIMIT_NOFILE is STARVED_NOFILE."""

    def limit() -> None:
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (STARVED_NOFILE, hard))

    command = [sys.executable, "-m", "api", "worker", "--processes", "1", "--region", region]
    with log.open("wb") as handle:
        process = subprocess.Popen(
            command,
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=REPO,
            preexec_fn=limit,  # noqa: PLW1509 (no threads hold locks the child needs)
        )
    proc = Proc(process, log)
    client = redis.Redis.from_url(redis_url)
    deadline = time.monotonic() + 60
    while next(iter(client.scan_iter(match=heartbeat_pattern(region))), None) is None:
        assert process.poll() is None and time.monotonic() < deadline, proc.text()
        time.sleep(0.05)
    return proc


@pytest.fixture(scope="module")
def stack(
    redis_server: RedisServer, worker_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[httpx.Client, Proc, Proc]]:
    """A control plane, a worker of region ``conn`` and a starved one of ``starved``."""
    tmp = tmp_path_factory.mktemp("connections")
    worker = start_worker("conn", worker_env, tmp / "worker-conn.log", redis_server.url)
    starved = _starved_worker("starved", worker_env, tmp / "worker-starved.log", redis_server.url)
    plane, base = start_control_plane(worker_env, tmp / "api.duckdb", tmp / "api.log")
    headers = {"authorization": f"Bearer {API_TOKEN}"}
    with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
        yield client, worker, starved
    plane.stop()
    starved.stop(3)
    worker.stop(3)


def _run(client: httpx.Client, scenario: dict[str, Any]) -> dict[str, Any]:
    created = client.post("/v1/runs", json={"scenario": scenario})
    assert created.status_code == 201, created.text
    return wait_for_run(client, created.json()["id"], 300)


def test_connections_a_run_opened_are_closed_when_it_ends(
    stack: tuple[httpx.Client, Proc, Proc],
) -> None:
    client, worker, _ = stack
    pid = worker.process.pid
    assert _run(client, _scenario("conn", 4, 8))["state"] == "finished"  # simulator up
    baseline = settle(pid, 0, timeout_s=2)
    # 3,000 streams with 3,000 requests: six shards of 500, each pre-warming its 500
    # connections to the simulator and reusing them for its requests.
    peak = [0]
    done = threading.Event()

    def sample() -> None:  # the most sockets the worker held while the run went
        while not done.wait(0.2):
            peak[0] = max(peak[0], sockets_of(pid))

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        view = _run(client, _scenario("conn", 3000, 3000))
    finally:
        done.set()
        sampler.join()
    assert view["state"] == "finished", view
    assert view["requests_done"] == 3000 and view["errors"] == 0, view
    assert peak[0] >= baseline + 1000, peak  # the connections were really opened...
    # ...and are closed once it finished.
    assert settle(pid, baseline + SLACK) <= baseline + SLACK, worker.text()[-3000:]
    # 3,000 users with 6 requests: six streams, nothing more opened, nothing left.
    view = _run(client, _scenario("conn", 3000, 6))
    assert view["state"] == "finished" and view["requests_done"] == 6, view
    assert settle(pid, baseline + SLACK) <= baseline + SLACK, worker.text()[-3000:]


def test_a_shard_beyond_the_descriptor_budget_is_refused_and_the_worker_serves_on(
    stack: tuple[httpx.Client, Proc, Proc],
) -> None:
    client, _, starved = stack
    view = _run(client, _scenario("starved", 500, 500))
    assert view["state"] == "failed", view
    (shard,) = [s for stage in view["stages"] for s in stage["shards"]]
    assert shard["state"] == "failed", shard
    assert "needs 500 connections" in shard["message"], shard
    assert "descriptor budget is" in shard["message"], shard
    assert f"RLIMIT_NOFILE {STARVED_NOFILE}" in shard["message"], shard
    assert shard["requests_done"] == 0, shard
    # Nothing was opened for it: the next, smaller run on the same worker succeeds.
    view = _run(client, _scenario("starved", 8, 16))
    assert view["state"] == "finished", (view, starved.text()[-3000:])
    assert view["requests_done"] == 16 and view["errors"] == 0, view
    assert os.path.exists(f"/proc/{starved.process.pid}")
