"""api/schedules/service.py with a real DuckDB file and APScheduler, the run starter
replaced by a recorder: what a fire records (started, skipped while the previous run
runs, failed with the reason), one catch-up on start whatever was missed, none for a
paused schedule, and an ended run judged and notified once."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from pathlib import Path

import duckdb
import pytest

from analytics.store.db import connect
from analytics.store.runs import RunStore
from api.rest.errors import RegionUnavailable
from api.schedules.service import ScheduleService, describe_error
from api.schedules.store import FireKind, FireOutcome, StoredSchedule
from api.schemas import RunCreate, RunOverrides, ScheduleCreate
from scenarios.loader import Problem, ScenarioError
from scenarios.settings import EgressSettings, ScheduleSettings, Settings
from tests.fakes.catcher import Catcher
from tests.support.analytics_builders import MS, ok_result, scenario, store_run

SETTINGS = Settings(
    egress=EgressSettings(allow_loopback=True),
    schedules=ScheduleSettings(min_interval_s=1, webhook_attempts=1),
)


class Starter:
    """Records the runs asked for; answers run ids, or raises what it is told to."""

    def __init__(self) -> None:
        self.bodies: list[RunCreate] = []
        self.running: set[str] = set()
        self.error: Exception | None = None

    async def __call__(self, body: RunCreate, schedule_id: str) -> str:
        if self.error is not None:
            raise self.error
        self.bodies.append(body)
        run_id = f"run-{len(self.bodies)}"
        self.running.add(run_id)
        return run_id


@pytest.fixture
def con(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    return connect(tmp_path / "service.duckdb")


def _service(con: duckdb.DuckDBPyConnection, starter: Starter) -> ScheduleService:
    return ScheduleService(con, SETTINGS, starter, lambda run_id: run_id in starter.running)


def _schedule(service: ScheduleService, **changes: object) -> StoredSchedule:
    body = ScheduleCreate.model_validate({"scenario_id": "sc-1", "cron": "* * * * *", **changes})
    return service.add(body)


def _backdate(con: duckdb.DuckDBPyConnection, schedule: StoredSchedule, minutes: float) -> None:
    anchor = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=minutes)
    _anchor(con, schedule, anchor)


def _anchor(con: duckdb.DuckDBPyConnection, schedule: StoredSchedule, anchor: dt.datetime) -> None:
    con.execute(
        "UPDATE schedules SET fire_anchor_at = ? WHERE schedule_id = ?",
        [anchor, schedule.schedule_id],
    )


def test_a_fire_starts_a_run_with_the_schedules_overrides(con: duckdb.DuckDBPyConnection) -> None:
    async def scenario_() -> None:
        starter = Starter()
        service = _service(con, starter)
        await service.start()
        schedule = _schedule(
            service, overrides={"regions": ["eu"]}, wait_for_workers=True, name="nightly"
        )
        assert service.next_fire_at(schedule.schedule_id) is not None
        _backdate(con, schedule, 1.5)
        await service._fire(schedule.schedule_id)
        # The previous run still runs: the next due fire is skipped, and says why.
        _backdate(con, schedule, 1.5)
        await service._fire(schedule.schedule_id)
        starter.running.clear()
        starter.error = RegionUnavailable(["eu"])
        _backdate(con, schedule, 1.5)
        await service._fire(schedule.schedule_id)
        await service.stop()
        fires = list(reversed(service.store.fires(schedule.schedule_id)))
        assert [f["outcome"] for f in fires] == [
            FireOutcome.STARTED, FireOutcome.SKIPPED, FireOutcome.FAILED,
        ]  # fmt: skip
        assert fires[0]["run_id"] == "run-1" and fires[0]["kind"] == FireKind.SCHEDULED
        assert fires[1]["message"] == "run run-1 of this schedule is still running"
        assert fires[2]["message"] == "no live worker in region(s): eu"
        assert starter.bodies == [
            RunCreate(
                scenario_id="sc-1",
                overrides=RunOverrides(regions=["eu"]),
                wait_for_workers=True,
            )
        ]

    asyncio.run(scenario_())


def test_a_start_catches_up_once_whatever_was_missed(con: duckdb.DuckDBPyConnection) -> None:
    async def scenario_() -> None:
        starter = Starter()
        first = _service(con, starter)
        missed = _schedule(first, cron="0 * * * *")  # hourly
        paused = _schedule(first, cron="0 * * * *")
        first.pause(paused.schedule_id)
        hour = dt.datetime.now(dt.UTC).replace(minute=0, second=0, microsecond=0)
        _anchor(con, missed, hour - dt.timedelta(hours=10))  # ten hourly fires since
        _anchor(con, paused, hour - dt.timedelta(hours=10))
        # A new control plane on the same file.
        again = _service(con, starter)
        await again.start()
        for _ in range(200):
            if again.store.fires(missed.schedule_id):
                break
            await asyncio.sleep(0.05)
        await again.stop()
        fires = again.store.fires(missed.schedule_id)
        assert len(fires) == 1 and fires[0]["kind"] == FireKind.CATCH_UP
        assert fires[0]["message"].startswith("10 fire(s) missed")
        assert again.store.fires(paused.schedule_id) == []  # paused: nothing caught up
        assert len(starter.bodies) == 1

    asyncio.run(scenario_())


def test_resume_does_not_catch_up_the_paused_time(con: duckdb.DuckDBPyConnection) -> None:
    async def scenario_() -> None:
        starter = Starter()
        service = _service(con, starter)
        await service.start()
        schedule = _schedule(service)
        service.pause(schedule.schedule_id)
        assert service.next_fire_at(schedule.schedule_id) is None
        _backdate(con, schedule, 30)
        resumed = service.resume(schedule.schedule_id)
        await service._fire(schedule.schedule_id)
        await service.stop()
        assert resumed.fire_anchor_at > dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1)
        assert service.store.fires(schedule.schedule_id) == []
        service.delete(schedule.schedule_id)
        assert service.store.live() == []

    asyncio.run(scenario_())


def test_an_ended_run_is_judged_and_its_regression_notified(
    con: duckdb.DuckDBPyConnection,
) -> None:
    receiver = Catcher().start()
    spec = scenario([{"name": "api", "kind": "simulated"}])

    async def scenario_() -> None:
        starter = Starter()
        service = _service(con, starter)
        schedule = _schedule(service, webhook_url=f"{receiver.url}/hook")
        now = dt.datetime.now(dt.UTC)
        for index, ttft in enumerate((20.0, 20.4, 60.0)):
            run_id = f"r{index}"
            results = [ok_result(i * 20 * MS, ttft + 0.01 * i, [5.0] * 5) for i in range(40)]
            store_run(con, run_id, spec, {("api", 0, "local"): results})
            RunStore(con).finish_run(run_id, "finished")
            con.execute(
                "INSERT INTO run_origins VALUES (?, 'sc-1', ?)", [run_id, schedule.schedule_id]
            )
            service.store.add_fire(
                schedule.schedule_id, now, FireKind.SCHEDULED, FireOutcome.STARTED, run_id
            )
        await service.evaluate_ended()
        await service.evaluate_ended()  # judged once: nothing is sent twice
        fires = list(reversed(service.store.fires(schedule.schedule_id)))
        assert [f["regressions"] == [] for f in fires] == [True, True, False]
        assert {r["metric"] for r in fires[2]["regressions"]} >= {"ttft_p50_ms"}
        webhook = service.store.last_webhook(schedule.schedule_id)
        assert webhook is not None and webhook["outcome"] == "delivered"
        assert [json.loads(r.body)["run_id"] for r in receiver.requests] == ["r2"]

    try:
        asyncio.run(scenario_())
    finally:
        receiver.stop()


def test_a_failed_fire_says_why_in_one_line() -> None:
    problems = ScenarioError([Problem("regions.0", "unknown"), Problem("", "bad")])
    assert describe_error(problems) == "regions.0: unknown; scenario: bad"
    assert describe_error(RegionUnavailable(["us"])) == "no live worker in region(s): us"


def test_a_fire_whose_target_is_busy_queues_its_run(con: duckdb.DuckDBPyConnection) -> None:
    async def scenario_() -> None:
        starter = Starter()
        note = "queued: its target is in use by another run (run-other)"
        service = ScheduleService(
            con, SETTINGS, starter, lambda run_id: run_id in starter.running, lambda _: note
        )
        await service.start()
        schedule = _schedule(service)
        _backdate(con, schedule, 1.5)
        await service._fire(schedule.schedule_id)
        await service.stop()
        (fire,) = service.store.fires(schedule.schedule_id)
        assert (fire["outcome"], fire["run_id"]) == (FireOutcome.STARTED, "run-1")
        assert fire["message"].endswith(note)  # after a note on late fires, if any

    asyncio.run(scenario_())
