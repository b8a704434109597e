"""api/schedules/store.py on a real DuckDB file: schedules, fires (kept up to a bound, the
anchor moved with each), deliveries and run origins."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import pytest

from analytics.store.db import connect
from api.schedules import store as store_module
from api.schedules.store import (
    FireKind,
    FireOutcome,
    ScheduleState,
    ScheduleStore,
    StoredSchedule,
    UnknownScheduleError,
    record_origin,
)


@pytest.fixture
def con(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    return connect(tmp_path / "store.duckdb")


def _add(store: ScheduleStore, **changes: object) -> StoredSchedule:
    fields: dict[str, object] = {
        "name": "nightly", "scenario_id": "sc-1", "cron": "0 * * * *", "timezone": "UTC",
        "overrides": {"regions": ["eu"]}, "wait_for_workers": False,
        "webhook_url": "https://hooks.example/x", "trend_window": 5, "min_change": 0.1,
    }  # fmt: skip
    return store.add(**{**fields, **changes})  # type: ignore[arg-type]


def test_a_schedule_reads_back_as_stored(con: duckdb.DuckDBPyConnection) -> None:
    store = ScheduleStore(con)
    added = _add(store)
    assert store.get(added.schedule_id) == added
    assert added.state == ScheduleState.ACTIVE and added.fire_anchor_at == added.created_at
    assert added.overrides == {"regions": ["eu"]}
    second = _add(store, name=None, overrides=None)
    assert [s.schedule_id for s in store.live()] == [added.schedule_id, second.schedule_id]
    assert store.count_live() == 2


def test_pause_resume_and_delete(con: duckdb.DuckDBPyConnection) -> None:
    store = ScheduleStore(con)
    schedule = _add(store)
    store.set_state(schedule.schedule_id, ScheduleState.PAUSED)
    assert store.get(schedule.schedule_id).state == ScheduleState.PAUSED
    later = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    store.set_state(schedule.schedule_id, ScheduleState.ACTIVE, anchor=later)
    assert store.get(schedule.schedule_id).fire_anchor_at == later
    store.set_state(schedule.schedule_id, ScheduleState.DELETED)
    with pytest.raises(UnknownScheduleError, match=schedule.schedule_id):
        store.get(schedule.schedule_id)
    assert store.get(schedule.schedule_id, deleted=True).state == ScheduleState.DELETED
    assert store.live() == [] and store.count_live() == 0
    with pytest.raises(UnknownScheduleError):
        store.set_state("sch-nope", ScheduleState.PAUSED)


def test_fires_are_numbered_kept_to_a_bound_and_move_the_anchor(
    con: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "MAX_SCHEDULE_FIRES_KEPT", 3)
    store = ScheduleStore(con)
    schedule = _add(store)
    start = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    for minute in range(5):
        due = start + dt.timedelta(minutes=minute)
        outcome = FireOutcome.STARTED if minute % 2 == 0 else FireOutcome.SKIPPED
        run = f"r{minute}" if outcome == FireOutcome.STARTED else None
        store.add_fire(schedule.schedule_id, due, FireKind.SCHEDULED, outcome, run)
    fires = store.fires(schedule.schedule_id)
    assert [f["seq"] for f in fires] == [5, 4, 3]  # newest first, the oldest dropped
    assert store.get(schedule.schedule_id).fire_anchor_at == start + dt.timedelta(minutes=4)
    assert store.last_started_run(schedule.schedule_id) == "r4"
    assert fires[0]["run_state"] is None  # no such run stored


def test_ended_runs_await_their_verdict_once(con: duckdb.DuckDBPyConnection) -> None:
    store = ScheduleStore(con)
    schedule = _add(store)
    now = dt.datetime.now(dt.UTC)
    for run_id, state in (("r-ended", "finished"), ("r-running", "running")):
        con.execute("INSERT INTO runs VALUES (?, 'n', '{}', ?, NULL, ?)", [run_id, now, state])
        store.add_fire(schedule.schedule_id, now, FireKind.SCHEDULED, FireOutcome.STARTED, run_id)
    assert store.unevaluated() == [(schedule.schedule_id, 1, "r-ended")]
    store.set_evaluated(schedule.schedule_id, 1, [{"metric": "ttft_p50_ms"}])
    assert store.unevaluated() == []
    fire = store.fires(schedule.schedule_id)[-1]
    assert fire["regressions"] == [{"metric": "ttft_p50_ms"}] and fire["run_state"] == "finished"


def test_deliveries_and_origins(con: duckdb.DuckDBPyConnection) -> None:
    store = ScheduleStore(con)
    schedule = _add(store)
    assert store.last_webhook(schedule.schedule_id) is None
    store.record_webhook(schedule.schedule_id, "r1", 3, 503, "failed", "HTTP 503")
    store.record_webhook(schedule.schedule_id, "r2", 1, 200, "delivered", None)
    last = store.last_webhook(schedule.schedule_id)
    assert last is not None and (last["run_id"], last["outcome"]) == ("r2", "delivered")
    record_origin(con, "r1", "sc-1", schedule.schedule_id)
    record_origin(con, "r9", "sc-1", None)
    rows = con.execute("SELECT * FROM run_origins ORDER BY run_id").fetchall()
    assert rows == [("r1", "sc-1", schedule.schedule_id), ("r9", "sc-1", None)]
