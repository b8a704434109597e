"""Redis SIGKILLed mid-run and started again, with its data and empty.

Real processes: a Redis of the test's own, ``tokenbench serve``, ``tokenbench worker``.
Whatever happens, a run ends, the worker is still alive and serving, and nothing is lost
silently: every planned request is recorded, or counted as missing in a failed shard's
message.
"""

from __future__ import annotations

import time

import pytest
import redis

from tests.faults.conftest import FaultStack, scenario
from tests.support.polls import wait_for_view

pytestmark = pytest.mark.integration

REGION = "fault"


@pytest.mark.parametrize("keep_data", [True, False], ids=["with-persistence", "empty"])
def test_redis_restart_mid_run_loses_nothing_silently(
    fault_stack: FaultStack, keep_data: bool
) -> None:
    worker = fault_stack.worker(REGION)
    with fault_stack.control_plane() as client:
        # Two stages of 100: the first is running when Redis dies, the second is
        # dispatched after it came back.
        run_id = client.post("/v1/runs", json={"scenario": scenario(REGION, 100, [1, 2])}).json()[
            "id"
        ]
        wait_for_view(client, run_id, lambda v: v["requests_done"] >= 20, timeout_s=120)

        # A key nobody writes again: the run's streams are made again within a second of
        # the restart (by the control plane and by the worker), this one is not.
        direct = redis.Redis.from_url(fault_stack.redis.url)
        direct.set("test:sentinel", 1)
        direct.close()
        fault_stack.redis.kill()
        time.sleep(3)  # the worker and the control plane see it gone
        fault_stack.redis.restart(keep_data=keep_data)
        if not keep_data:
            after = redis.Redis.from_url(fault_stack.redis.url)
            assert not after.exists("test:sentinel")
            after.close()

        view = wait_for_view(client, run_id, lambda v: v["state"] != "running", timeout_s=180)
        assert worker.process.poll() is None, fault_stack.logs()
        # Still serving: a new run after the fault is executed by the same worker.
        again = client.post("/v1/runs", json={"scenario": scenario(REGION, 5, [1])}).json()["id"]
        after = wait_for_view(client, again, lambda v: v["state"] != "running", timeout_s=120)
    fault_stack.stop()

    counts = fault_stack.counts(run_id)
    print(f"\nRedis restart {'with persistence' if keep_data else 'empty'}: {counts}")
    assert counts.planned == 200
    assert counts.planned == counts.recorded + counts.missing, (counts, view)
    # Both recover fully: the first keeps running through the outage, the second is
    # re-dispatched as a new attempt.
    assert view["state"] == "finished", (view, fault_stack.logs())
    assert counts.recorded == 200
    assert after["state"] == "finished"
    first = [a for a in counts.attempts if a[0].startswith("s0.")]
    if keep_data:
        assert [a[1:3] for a in first] == [(1, "finished")], first
    else:
        assert [a[2] for a in first] == ["abandoned", "finished"], first
        assert "Redis lost its state" in (first[0][3] or "")
        assert "Redis lost its state" in fault_stack.procs[-1].text()


def test_worker_waits_then_gives_up_and_the_watchdog_redispatches(
    fault_stack: FaultStack,
) -> None:
    """Redis away for longer than the worker may wait: the worker stops the shard and
    says so; the run, left without progress, is re-dispatched by the watchdog."""
    worker = fault_stack.worker(REGION, TOKENBENCH__CONTROL__REDIS_PATIENCE_S="2")
    with fault_stack.control_plane(TOKENBENCH__CONTROL__STALL_TIMEOUT_S="8") as client:
        run_id = client.post("/v1/runs", json={"scenario": scenario(REGION, 80, [1])}).json()["id"]
        wait_for_view(client, run_id, lambda v: v["requests_done"] >= 10, timeout_s=120)
        fault_stack.redis.kill()
        deadline = time.monotonic() + 60
        while "Redis unreachable for 2 s" not in worker.text():
            assert time.monotonic() < deadline, worker.text()[-3000:]
            time.sleep(0.3)
        fault_stack.redis.restart(keep_data=True)
        view = wait_for_view(client, run_id, lambda v: v["state"] != "running", timeout_s=180)
        assert worker.process.poll() is None, fault_stack.logs()
    fault_stack.stop()

    counts = fault_stack.counts(run_id)
    print(f"\nRedis away past the worker's patience: {counts}")
    assert view["state"] == "finished", (view, fault_stack.logs())
    assert counts.planned == counts.recorded == 80
    states = [(a[1], a[2]) for a in counts.attempts]
    assert states == [(1, "abandoned"), (2, "finished")], counts.attempts
    assert "no progress for" in (counts.attempts[0][3] or "")
