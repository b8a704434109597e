"""api/control/queue.py: which queued runs start, in what order, and why the others
wait (FIFO per target, shared targets as a readers-writer rule, team quotas that hold
back nothing of other teams), persisted so that a restart still has them queued."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import duckdb
import pytest

from analytics.store.db import connect
from api.access.caller import Caller, Role
from api.access.teams import TeamStore
from api.control.queue import RunQueue
from api.control.run_views import HIDDEN_RUN, queue_public
from scenarios.errors import QuotaExceeded
from scenarios.loader import validate_scenario
from scenarios.model import Scenario
from scenarios.settings import TeamSettings

RED = Caller("tok-red", "red", Role.SUBMITTER)
BLUE = Caller("tok-blue", "blue", Role.SUBMITTER)


def scenario(*urls: str, shared: bool = False) -> Scenario:
    providers: list[dict[str, Any]] = [
        {"name": f"p{i}", "kind": "openai", "base_url": url, "model": "m", "shared": shared}
        for i, url in enumerate(urls)
    ] or [{"name": "sim", "kind": "simulated"}]
    return validate_scenario(
        {
            "name": "queue",
            "providers": providers,
            "workload": {
                "mix": [
                    {
                        "prompt_tokens": {"dist": "fixed", "value": 4},
                        "output_tokens": {"dist": "fixed", "value": 2},
                    }
                ]
            },
            "load": {"concurrency": [1], "requests_per_level": 2},
        }
    )


@pytest.fixture
def con(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    return connect(tmp_path / "queue.duckdb")


def queue(con: duckdb.DuckDBPyConnection, **teams: Any) -> RunQueue:
    # No run is driven by the loop here: what holds a target is a run being started.
    plane = SimpleNamespace(runs={})
    return RunQueue(plane, con, TeamSettings(**teams))  # type: ignore[arg-type]


def submit(q: RunQueue, run_id: str, s: Scenario, caller: Caller = RED) -> bool:
    """Admit a run as the starter does: True if it starts (and holds its targets)."""
    admission = q.admit(run_id, s, caller)
    if admission.queued:
        q.enqueue(run_id, s, caller, wait=False)
    return not admission.queued


def test_one_target_queues_the_second_run_behind_the_first(
    con: duckdb.DuckDBPyConnection,
) -> None:
    q = queue(con)
    assert submit(q, "r1", scenario("http://A:80/v1/"))
    assert not submit(q, "r2", scenario("http://a/v1"))  # the same target, spelled otherwise
    waiting = q.waiting("r2")
    assert waiting is not None and (waiting.position, waiting.waiting_for) == (1, ["r1"])
    assert not submit(q, "r3", scenario("http://a/v1"))
    third = q.waiting("r3")
    assert third is not None and third.position == 2
    assert q.plan().start == []
    q.started("r1", "red")  # the starter's own bookkeeping; r1 ran and ended
    q.starting.clear()
    assert [e.run_id for e in q.plan().start] == ["r2"]  # FIFO: r3 still waits for r2


def test_two_targets_and_simulated_runs_never_wait_for_each_other(
    con: duckdb.DuckDBPyConnection,
) -> None:
    q = queue(con)
    assert submit(q, "a", scenario("http://a/v1"))
    assert submit(q, "b", scenario("http://b/v1"))
    assert submit(q, "sim", scenario())


def test_shared_runs_overlap_but_a_run_alone_waits_for_them(
    con: duckdb.DuckDBPyConnection,
) -> None:
    q = queue(con)
    assert submit(q, "s1", scenario("http://a/v1", shared=True))
    assert submit(q, "s2", scenario("http://a/v1", shared=True))
    assert not submit(q, "alone", scenario("http://a/v1"))
    assert sorted(q.waiting("alone").waiting_for) == ["s1", "s2"]  # type: ignore[union-attr]
    # A later shared run does not jump ahead of the one waiting to be alone.
    assert not submit(q, "s3", scenario("http://a/v1", shared=True))
    assert q.waiting("s3").waiting_for == ["alone"]  # type: ignore[union-attr]


def test_a_team_at_its_quota_queues_and_holds_back_no_other_team(
    con: duckdb.DuckDBPyConnection,
) -> None:
    q = queue(con, max_concurrent_runs=1, max_queued_runs=1)
    assert submit(q, "red-1", scenario(), RED)
    assert not submit(q, "red-2", scenario("http://a/v1"), RED)
    waiting = q.waiting("red-2")
    assert waiting is not None and "max_concurrent_runs" in waiting.reason
    assert "TOKENBENCH__TEAMS__MAX_CONCURRENT_RUNS" in waiting.reason
    assert waiting.waiting_for == ["red-1"]
    # Blue, on the very target red's queued run wants, starts: red waits for its quota.
    assert submit(q, "blue-1", scenario("http://a/v1"), BLUE)
    with pytest.raises(QuotaExceeded) as refused:
        submit(q, "red-3", scenario(), RED)
    assert refused.value.quota == "max_queued_runs"
    assert refused.value.setting == "TOKENBENCH__TEAMS__MAX_QUEUED_RUNS"
    assert "team red has 1 queued runs" in str(refused.value)
    assert refused.value.http_status == 429


def test_a_team_setting_is_named_when_it_is_the_teams_own(
    con: duckdb.DuckDBPyConnection,
) -> None:
    TeamStore(con, TeamSettings()).update("red", {"max_queued_runs": 0})
    q = queue(con, max_concurrent_runs=1)
    assert submit(q, "red-1", scenario(), RED)
    with pytest.raises(QuotaExceeded) as refused:
        submit(q, "red-2", scenario(), RED)
    assert refused.value.setting == "team red's max_queued_runs (tokenbench teams set)"


def test_queued_runs_survive_a_restart_and_a_cancel_ends_one(
    con: duckdb.DuckDBPyConnection,
) -> None:
    q = queue(con)
    assert submit(q, "r1", scenario("http://a/v1"))
    con.execute("INSERT INTO runs VALUES ('r1', 'queue', '{}', now(), NULL, 'running')")
    assert not submit(q, "r2", scenario("http://a/v1"))
    assert not submit(q, "r3", scenario("http://a/v1"))
    assert q.cancel("r3") and not q.cancel("r3")
    states = dict(con.execute("SELECT run_id, state FROM runs").fetchall())
    assert states == {"r1": "running", "r2": "queued", "r3": "cancelled"}
    again = queue(con)
    assert again.load() == ["r2"]
    entry = again.entry("r2")
    assert entry is not None and entry.targets == ["http://a/v1 model=m key=-"]
    assert entry.team == "red" and entry.token_id == "tok-red"


def test_a_run_the_caller_may_not_read_is_not_named(con: duckdb.DuckDBPyConnection) -> None:
    q = queue(con)
    assert submit(q, "theirs", scenario("http://a/v1"), BLUE)
    assert not submit(q, "mine", scenario("http://a/v1"), RED)
    entry = q.entry("mine")
    assert entry is not None
    shown = queue_public(entry, q.waiting("mine"), lambda run_id: run_id != "theirs")
    assert shown.waiting_for == [HIDDEN_RUN] and shown.position == 1
    assert queue_public(entry, q.waiting("mine")).waiting_for == ["theirs"]
