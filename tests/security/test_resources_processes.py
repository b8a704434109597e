"""Simulated endpoints cannot pile up on a worker: runs of many distinct simulators, over
REST, leave at most the cap of simulator processes alive, and none (with the worker's
memory back near its baseline) once they have been idle for the worker's idle timeout.

A worker of its own (region ``simres``) runs with a small idle timeout and cap, so that
the test sees both in seconds; it serves the shared hostile control plane.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from tests.conftest import Proc, start_worker
from tests.security.conftest import HostileStack, scenario_with
from tests.support.polls import wait_until

# serial: it measures timing (or memory); nothing may run beside it (tests/support/tiers.py).
pytestmark = [pytest.mark.integration, pytest.mark.serial]

REGION = "simres"
CAP = 3
IDLE_S = 2.0
# Memory a worker may keep after its simulators stopped (allocator slack, caches of the
# runs it executed): far below one simulator process (~95 MB).
RSS_SLACK = 60 * 1024 * 1024


@pytest.fixture(scope="module")
def sim_worker(
    hostile_stack: HostileStack,
    worker_env: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Proc]:
    env = {
        **worker_env,
        "TOKENBENCH__WORKER__SIMULATOR_IDLE_S": str(IDLE_S),
        "TOKENBENCH__WORKER__MAX_SIMULATORS": str(CAP),
    }
    log = tmp_path_factory.mktemp("simres") / "worker-simres.log"
    proc = start_worker(REGION, env, log, hostile_stack.redis_url)
    yield proc
    proc.stop(3)


def simulators(worker: Proc) -> list[psutil.Process]:
    """The worker's simulator processes (its children running ``workers.simulator``)."""
    found = []
    for child in psutil.Process(worker.process.pid).children(recursive=True):
        try:
            if "workers.simulator" in child.cmdline():
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


def tree_rss(worker: Proc) -> int:
    """Resident memory of the worker and all its descendants, in bytes."""
    root = psutil.Process(worker.process.pid)
    total = root.memory_info().rss
    for child in root.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total


def distinct_simulators(count: int, offset: int) -> list[dict[str, Any]]:
    """``count`` simulated providers, each of its own configuration (its own process)."""
    return [
        {"name": f"sim{i}", "kind": "simulated", "simulate": {"ttft_ms": 5 + offset + i}}
        for i in range(count)
    ]


def run_watching(stack: HostileStack, worker: Proc, scenario: dict[str, Any]) -> dict[str, Any]:
    """Run ``scenario`` in the worker's region; the most simulators seen alive while it
    ran is put in the view as ``most_simulators``."""
    answer = stack.client.post("/v1/runs", json={"scenario": {**scenario, "regions": [REGION]}})
    assert answer.status_code == 201, answer.text
    run_id = answer.json()["id"]
    most = 0
    deadline = time.monotonic() + 240
    while True:
        most = max(most, len(simulators(worker)))
        view = stack.client.get(f"/v1/runs/{run_id}").json()
        if view["state"] != "running":
            break
        assert time.monotonic() < deadline, f"run {run_id} still running"
        time.sleep(0.1)
    return {**view, "most_simulators": most}


def shard_messages(view: dict[str, Any]) -> list[str]:
    return [s.get("message") or "" for stage in view["stages"] for s in stage["shards"]]


def test_two_runs_of_many_simulators_leave_at_most_the_cap_then_none(
    hostile_stack: HostileStack, sim_worker: Proc
) -> None:
    wait_until(lambda: not simulators(sim_worker), 60, "the worker starts without simulators")
    baseline = tree_rss(sim_worker)
    for run in range(2):
        scenario = scenario_with(*distinct_simulators(CAP + 2, offset=100 * run))
        view = run_watching(hostile_stack, sim_worker, scenario)
        assert view["most_simulators"] <= CAP, view
        assert len(simulators(sim_worker)) <= CAP
        # Every shard either ran or was refused with the cap named (never a hang).
        for message in shard_messages(view):
            assert not message or "TOKENBENCH__WORKER__MAX_SIMULATORS" in message, message
    # Idle for the timeout: every simulator stops, and the memory goes with them.
    wait_until(lambda: not simulators(sim_worker), 60, "idle simulators still running")
    wait_until(
        lambda: tree_rss(sim_worker) < baseline + RSS_SLACK,
        60,
        f"worker tree RSS {tree_rss(sim_worker)} vs baseline {baseline}",
    )
    # A normal run still succeeds afterwards (its simulator started again).
    view = run_watching(hostile_stack, sim_worker, scenario_with(*distinct_simulators(1, 0)))
    assert view["state"] == "finished", view
    assert sim_worker.process.poll() is None


def test_a_run_asking_for_more_simulators_than_the_cap_cannot_exceed_it(
    hostile_stack: HostileStack, sim_worker: Proc
) -> None:
    # Long shards (every one holds its endpoint for the whole stage): the shards beyond
    # the cap are refused with the cap named, never started beyond it.
    providers = [
        {**p, "simulate": {"ttft_ms": 200 + i, "itl_ms": 20}}
        for i, p in enumerate(distinct_simulators(CAP + 3, 0))
    ]
    view = run_watching(hostile_stack, sim_worker, scenario_with(*providers, requests=30))
    assert view["most_simulators"] <= CAP, view
    for message in shard_messages(view):
        assert not message or "TOKENBENCH__WORKER__MAX_SIMULATORS" in message, message
    wait_until(lambda: not simulators(sim_worker), 60, "idle simulators still running")
    assert sim_worker.process.poll() is None


def test_worker_shutdown_stops_its_simulators(
    hostile_stack: HostileStack,
    worker_env: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    region = "simstop"
    env = {**worker_env, "TOKENBENCH__WORKER__SIMULATOR_IDLE_S": "600"}
    log = tmp_path_factory.mktemp("simstop") / "worker-simstop.log"
    worker = start_worker(region, env, log, hostile_stack.redis_url)
    try:
        scenario = {**scenario_with(*distinct_simulators(2, 500)), "regions": [region]}
        answer = hostile_stack.client.post("/v1/runs", json={"scenario": scenario})
        assert answer.status_code == 201, answer.text
        assert hostile_stack.wait_for_run(answer.json()["id"])["state"] == "finished"
        kept = simulators(worker)
        assert len(kept) == 2  # idle, kept for the (long) idle timeout
        worker.stop()  # SIGTERM: warm shutdown
        assert worker.process.returncode is not None
        # Stopped by the worker before it exited (a simulator left alone would poll for
        # its parent and still be running at this instant).
        assert not [p for p in kept if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    finally:
        worker.stop(9)
