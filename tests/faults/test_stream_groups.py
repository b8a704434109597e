"""Consumer groups on a shared service: streams come and go while runs go.

A shadow session opened or stopped while a run goes adds or deletes streams the control
loop reads. Neither may be taken for "Redis lost its state" (which abandons every running
attempt and sends it again): the run goes on with one attempt per shard. A group deleted
by hand while Redis keeps its state is made again, and nothing is re-dispatched.
"""

from __future__ import annotations

import time

import pytest
import redis

from scenarios.wire.contract import metrics_stream
from tests.faults.conftest import FaultStack, scenario
from tests.support.polls import wait_for_view
from tests.support.teams import gateway_config

pytestmark = pytest.mark.integration

REGION = "fault"
SESSIONS = 12


def _one_attempt_each(stack: FaultStack, run_id: str) -> None:
    counts = stack.counts(run_id)
    assert counts.state == "finished", (counts, stack.logs())
    assert counts.planned == counts.recorded == 200, counts
    assert {a[1] for a in counts.attempts} == {1}, counts.attempts
    assert "lost its state" not in stack.procs[-1].text(), stack.logs()


def test_sessions_opened_and_stopped_beside_a_run_leave_it_alone(
    fault_stack: FaultStack,
) -> None:
    fault_stack.worker(REGION)
    with fault_stack.control_plane() as client:
        run_id = client.post(
            "/v1/runs", json={"scenario": scenario(REGION, 100, [2, 4], itl_ms=10)}
        ).json()["id"]
        wait_for_view(client, run_id, lambda v: v["requests_done"] >= 5, timeout_s=120)
        for n in range(SESSIONS):
            opened = client.post(
                "/v1/shadow-sessions",
                json={"config": gateway_config(f"s{n}"), "wait_for_workers": True},
            )
            assert opened.status_code == 201, opened.text
            stopped = client.post(f"/v1/shadow-sessions/{opened.json()['id']}/stop?drain_s=0")
            assert stopped.status_code == 202, stopped.text
        view = wait_for_view(client, run_id, lambda v: v["state"] != "running", timeout_s=180)
        assert view["state"] == "finished", (view, fault_stack.logs())
    fault_stack.stop()
    _one_attempt_each(fault_stack, run_id)


def test_a_group_deleted_by_hand_is_made_again_and_nothing_is_sent_twice(
    fault_stack: FaultStack,
) -> None:
    fault_stack.worker(REGION)
    direct = redis.Redis.from_url(fault_stack.redis.url)
    try:
        with fault_stack.control_plane() as client:
            run_id = client.post(
                "/v1/runs", json={"scenario": scenario(REGION, 100, [2, 4], itl_ms=10)}
            ).json()["id"]
            wait_for_view(client, run_id, lambda v: v["requests_done"] >= 5, timeout_s=120)
            # The run's telemetry stream (empty: the simulator is not scraped) loses its
            # group while Redis keeps everything else.
            stream = metrics_stream(run_id)
            assert direct.xgroup_destroy(stream, "control") == 1
            deadline = time.monotonic() + 60
            while not direct.xinfo_groups(stream):
                assert time.monotonic() < deadline, fault_stack.logs()
                time.sleep(0.2)
            view = wait_for_view(client, run_id, lambda v: v["state"] != "running", timeout_s=180)
            assert view["state"] == "finished", (view, fault_stack.logs())
    finally:
        direct.close()
    fault_stack.stop()
    assert "consumer group is missing while Redis keeps its state" in fault_stack.procs[-1].text()
    _one_attempt_each(fault_stack, run_id)
