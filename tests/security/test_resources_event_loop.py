"""An authenticated user cannot block the control plane's event loop with views.

The attacker submits the largest run a scenario may have (10,000 shards, in regions no
worker serves, waiting for workers, then cancelled) and has many clients view it at
once, more than the control plane's heavy-work slots (TOKENBENCH__API__HEAVY_REQUESTS).
/healthz must keep answering all along (views are built off the event loop), every
view is either answered or refused 503 with Retry-After (the slots' bounded wait), and
the service is healthy afterwards. With one slot and no wait, views past it are
refused 503 with Retry-After at once: the queue is bounded. Nothing is timed: answers
are counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from api.local.redis_server import RedisServer
from scenarios.limits import MAX_SHARDS_PER_RUN
from tests.conftest import API_TOKEN, Proc, start_control_plane
from tests.security.conftest import HostileStack
from tests.support.views_under_load import stored_big_run, view_while_probing

# serial: /healthz must answer all along; nothing may run beside it (tests/support/tiers.py).
pytestmark = [pytest.mark.integration, pytest.mark.serial]

# More clients than the default two slots: some wait for one (or are refused).
CLIENTS, VIEWS = 8, 2


def test_many_views_of_the_largest_run_never_hold_healthz_back(
    hostile_stack: HostileStack,
) -> None:
    run_id = stored_big_run(hostile_stack.client)

    seen = view_while_probing(hostile_stack.base, API_TOKEN, run_id, CLIENTS, VIEWS)

    statuses = [status for status, _, _ in seen.views]
    assert len(statuses) == CLIENTS * VIEWS
    assert set(statuses) <= {200, 503}, statuses
    assert 200 in statuses
    assert all(value.isdigit() and int(value) >= 1 for value in seen.retry_after)
    # Built on the loop, a view holds /healthz back until it is built: none is answered
    # while every client's first view is worked on (one may slip in before the work
    # starts), and about two per view fit in the gaps between views. Off the loop,
    # /healthz is answered all along. (Measured: on the loop 2 and ~2.5 per view; off
    # it 17 and ~9 per view, at a load average of 5 on 2 cores.)
    before = seen.healthz_before_any_view()
    during = seen.healthz_during_views()
    assert before >= 5, (before, during, len(statuses))
    assert during >= 4 * len(statuses), (before, during, len(statuses))
    view = hostile_stack.client.get(f"/v1/runs/{run_id}", timeout=600).json()
    assert sum(len(stage["shards"]) for stage in view["stages"]) == MAX_SHARDS_PER_RUN
    hostile_stack.assert_healthy()


@pytest.fixture
def one_slot_plane(
    redis_server: RedisServer, worker_env: dict[str, str], tmp_path: Path
) -> Iterator[tuple[Proc, str]]:
    """A control plane with one heavy-work slot and no wait for it."""
    env = {
        **worker_env,
        "TOKENBENCH__API__HEAVY_REQUESTS": "1",
        "TOKENBENCH__API__HEAVY_WAIT_S": "0",
    }
    proc, base = start_control_plane(env, tmp_path / "api.duckdb", tmp_path / "api.log")
    yield proc, base
    proc.stop()


def test_views_past_the_slots_are_refused_503_with_retry_after(
    one_slot_plane: tuple[Proc, str],
) -> None:
    """The queue is bounded: a view that finds the slot taken is answered 503 with
    Retry-After at once (no wait configured), never queued without bound."""
    proc, base = one_slot_plane
    headers = {"authorization": f"Bearer {API_TOKEN}"}
    with httpx.Client(base_url=base, headers=headers, timeout=600) as client:
        run_id = stored_big_run(client)
    statuses: list[int] = []
    retry_after: list[str] = []
    for _ in range(10):  # rounds of concurrent views, until one overlaps another
        seen = view_while_probing(base, API_TOKEN, run_id, clients=4, views=1)
        statuses += [status for status, _, _ in seen.views]
        retry_after += seen.retry_after
        if 503 in statuses:
            break
    assert set(statuses) == {200, 503}, statuses
    assert retry_after and all(value == "1" for value in retry_after), retry_after
    assert proc.process.poll() is None
    with httpx.Client(base_url=base, headers=headers, timeout=600) as client:
        assert client.get(f"/v1/runs/{run_id}").status_code == 200  # the slot came back
