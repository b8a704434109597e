"""Connections are bounded by what a run needs and released when it ends, over real REST.

The issue's reproduction: ``concurrency: [100000]`` with ``requests_per_level: 2`` was
planned as two shards of 50,000 streams; each pre-warmed that many connections, the
worker process reached its descriptor limit (~20,000 sockets) and every later shard on
it failed with ``Too many open files``; ``concurrency: [3000]`` left 3,000 sockets open
after its run. Each test here submits such a run to the real control plane and worker
and then asserts that the worker's open sockets are back near where they were, and that
a normal run still succeeds on it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from scenarios import limits
from tests.security.conftest import REGION, HostileStack, scenario_with, simulated
from tests.support.descriptors import settle

pytestmark = pytest.mark.integration

# Sockets a worker may hold beyond its baseline once a run is over: its Redis pool may
# grow by a connection or two under load.
SLACK = 16


@pytest.fixture
def baseline(hostile_stack: HostileStack) -> Iterator[int]:
    """The worker's sockets after a normal run (its simulator and Redis connections
    made), and, after the test, a normal run that still succeeds on the same worker."""
    run_normally(hostile_stack)
    pid = hostile_stack.worker.process.pid
    yield settle(pid, 0, timeout_s=2)  # whatever it holds at rest
    run_normally(hostile_stack)
    hostile_stack.assert_healthy()


def run_normally(stack: HostileStack) -> None:
    scenario = scenario_with(simulated(), requests=20)
    scenario["load"]["concurrency"] = [4]
    view = run(stack, scenario)
    assert view["state"] == "finished", view
    assert view["requests_done"] == 20 and view["errors"] == 0, view


def run(stack: HostileStack, scenario: dict[str, Any]) -> dict[str, Any]:
    created = stack.client.post("/v1/runs", json={"scenario": scenario}, timeout=60)
    assert created.status_code == 201, created.text
    return stack.wait_for_run(created.json()["id"], timeout_s=180)


def closed(concurrency: int, requests: int) -> dict[str, Any]:
    scenario = scenario_with(simulated(), requests=requests)
    scenario["load"]["concurrency"] = [concurrency]
    return scenario


@pytest.mark.parametrize(
    ("concurrency", "requests"),
    [(limits.MAX_CONCURRENCY, 2), (3000, 6)],
    ids=["100000-users-2-requests", "3000-users-6-requests"],
)
def test_far_more_users_than_requests_is_served_within_bounds(
    hostile_stack: HostileStack, baseline: int, concurrency: int, requests: int
) -> None:
    created = hostile_stack.client.post(
        "/v1/runs", json={"scenario": closed(concurrency, requests)}
    )
    assert created.status_code == 201, created.text
    # A closed loop never needs more streams than requests: one shard, not 50,000 streams.
    assert created.json()["shards"] == 1, created.json()
    view = hostile_stack.wait_for_run(created.json()["id"], timeout_s=180)
    assert view["state"] == "finished", view
    assert view["requests_done"] == requests and view["errors"] == 0, view
    pid = hostile_stack.worker.process.pid
    assert settle(pid, baseline + SLACK) <= baseline + SLACK


def test_an_open_loop_cap_far_above_its_requests_is_served_within_bounds(
    hostile_stack: HostileStack, baseline: int
) -> None:
    scenario = scenario_with(simulated(), requests=2)
    scenario["load"] = {
        "rate": {"rps": [limits.MAX_RPS], "max_in_flight": limits.MAX_CONCURRENCY},
        "requests_per_level": 2,
    }
    view = run(hostile_stack, scenario)
    assert view["state"] == "finished", view
    assert view["requests_done"] == 2 and view["errors"] == 0, view
    pid = hostile_stack.worker.process.pid
    assert settle(pid, baseline + SLACK) <= baseline + SLACK


def test_many_connections_a_run_used_are_closed_when_it_ends(
    hostile_stack: HostileStack, baseline: int
) -> None:
    """A run that really uses 1,000 connections (two shards of 500 streams, each with
    requests to send) leaves none of them open on the worker once it finished."""
    view = run(hostile_stack, closed(1000, 1000))
    assert view["state"] == "finished", view
    assert view["requests_done"] == 1000 and view["errors"] == 0, view
    pid = hostile_stack.worker.process.pid
    assert settle(pid, baseline + SLACK) <= baseline + SLACK


def test_a_level_no_plan_can_split_into_bounded_shards_is_refused_at_its_field(
    hostile_stack: HostileStack,
) -> None:
    """100,000 users for 10 s in 32 providers × 2 regions need 12,544 shards of at most
    512 streams: refused naming the level, never planned as fewer, larger shards."""
    providers = [simulated(f"sim{i}") for i in range(limits.MAX_PROVIDERS)]
    scenario = scenario_with(*providers, regions=[REGION, "idle"])
    scenario["load"] = {"concurrency": [limits.MAX_CONCURRENCY], "duration_s": 10}
    body = {"scenario": scenario, "wait_for_workers": True}  # "idle" has no worker
    answer = hostile_stack.client.post("/v1/runs", json=body, timeout=60)
    if answer.status_code == 201:
        hostile_stack.client.post(f"/v1/runs/{answer.json()['id']}/cancel")
    assert answer.status_code == 422, answer.text
    (problem,) = answer.json()["detail"]
    assert problem["loc"] == ["scenario", "load", "concurrency", 0]
    assert "at most 512 streams" in problem["msg"]
    assert f"more than the {limits.MAX_SHARDS_PER_RUN}" in problem["msg"]
    hostile_stack.assert_healthy()
