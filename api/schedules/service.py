"""The schedules of a control plane: APScheduler fires them, DuckDB remembers them.

``tokenbench serve`` runs one :class:`ScheduleService` beside its control loop. On start
it loads every active schedule from DuckDB into an APScheduler 3 ``AsyncIOScheduler``
(one job per schedule on its ``CronTrigger``; ``coalesce``: a late scheduler runs a fire
once, not once per missed time; ``misfire_grace_time``: a fire the running scheduler
could not start within ``TOKENBENCH__SCHEDULES__MISFIRE_GRACE_S`` is dropped by it), and
catches up once on each schedule whose fires fell while the control plane was down
(``fire_anchor_at`` is the last fire handled).

A fire creates a run exactly as ``POST /v1/runs`` does (``api/rest/run_start.py``: the
same validation, the same overrides, the same 409 without a live worker), unless the
schedule's previous run still runs (or waits in the queue): then it is skipped, and
recorded as skipped. A fire whose endpoint is busy with another run queues its run
(docs/teams.md, endpoint leases): it starts when the endpoint is free. Every
fire is recorded (``GET /v1/schedules/{id}/runs``). Fires of one schedule are serialised
by a lock, and each computes what is due from the stored anchor, so a catch-up and a
regular fire never start the same run twice.

When a fired run has ended, its trend is judged (``analytics.trends.build``, as of that run);
what it flags is stored with the fire, and the schedule's webhook, if any, is POSTed a
small JSON (``api/schedules/webhook.py``), its outcome recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import duckdb
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from analytics.trends.build import TrendOptions, TrendSelection, build_trend
from api.schedules.cron import fires_between, parse_cron
from api.schedules.store import (
    FireKind,
    FireOutcome,
    ScheduleState,
    ScheduleStore,
    StoredSchedule,
    UnknownScheduleError,
    now,
)
from api.schedules.webhook import deliver, regression_body
from api.schemas import RunCreate, RunOverrides, ScheduleCreate
from scenarios.errors import TokenbenchError
from scenarios.loader import ScenarioError
from scenarios.settings import Settings

log = logging.getLogger("tokenbench.schedules")

# How often ended runs are looked for, to judge their trend and send webhooks.
EVALUATE_EVERY_S = 1.0

# Starts the run a fire asks for and answers its id (api/rest/run_start.py).
StartRun = Callable[[RunCreate, str], Awaitable[str]]
# Whether the control loop still drives a run (or has it queued).
IsRunning = Callable[[str], bool]
# Why a run just created waits in the queue (None: it started).
QueuedNote = Callable[[str], str | None]


def describe_error(exc: TokenbenchError) -> str:
    """One line for a fire that could not start its run."""
    if isinstance(exc, ScenarioError):
        return "; ".join(f"{p.path or 'scenario'}: {p.message}" for p in exc.problems)
    detail = exc.public_detail()
    return str(detail) if isinstance(detail, str) else str(exc)


def run_regressions(
    cursor: duckdb.DuckDBPyConnection, schedule: StoredSchedule, run_id: str
) -> list[dict[str, Any]]:
    """What the schedule's trend flags in ``run_id``, judged as of that run (in a
    worker thread, on a cursor of its own, closed afterwards)."""
    try:
        options = TrendOptions(
            runs=schedule.trend_window + 1,
            window=schedule.trend_window,
            min_change=schedule.min_change,
            as_of=run_id,
        )
        report = build_trend(cursor, TrendSelection(schedule_id=schedule.schedule_id), options)
        return [r for r in report.regressions if r["latest_run_id"] == run_id]
    finally:
        cursor.close()


class ScheduleService:
    """Fires the stored schedules, records every fire, judges ended runs."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        settings: Settings,
        start_run: StartRun,
        is_running: IsRunning,
        queued_note: QueuedNote | None = None,
    ) -> None:
        self.con = con
        self.store = ScheduleStore(con)
        self.settings = settings
        self._start_run = start_run
        self._is_running = is_running
        self._queued_note = queued_note
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._scheduler = AsyncIOScheduler(
            timezone=dt.UTC,
            job_defaults={
                "coalesce": True,
                "max_instances": 1,
                "misfire_grace_time": int(settings.schedules.misfire_grace_s),
            },
        )
        self._tasks: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Load the active schedules, start the scheduler, then (in the background)
        catch up once on each schedule that missed fires and judge ended runs."""
        self._scheduler.start()
        for schedule in self.store.live():
            if schedule.state == ScheduleState.ACTIVE:
                self._add_job(schedule)
        self._spawn(self._catch_up_all())
        self._spawn(self._evaluate_forever())

    async def stop(self) -> None:
        """Stop firing; a fire or evaluation under way is cancelled (recorded state stays)."""
        if self._scheduler.running:
            self._scheduler.shutdown(wait=False)
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _add_job(self, schedule: StoredSchedule) -> None:
        trigger = parse_cron(schedule.cron, schedule.timezone)
        self._scheduler.add_job(
            self._fire,
            trigger=trigger,
            args=[schedule.schedule_id],
            id=schedule.schedule_id,
            name=schedule.name or schedule.schedule_id,
            replace_existing=True,
        )

    def _remove_job(self, schedule_id: str) -> None:
        if self._scheduler.get_job(schedule_id) is not None:
            self._scheduler.remove_job(schedule_id)

    # ------------------------------------------------------------------ schedules

    def add(self, body: ScheduleCreate) -> StoredSchedule:
        """Store a checked schedule and start firing it."""
        schedule = self.store.add(
            name=body.name,
            scenario_id=body.scenario_id,
            cron=body.cron,
            timezone=body.timezone,
            overrides=None if body.overrides is None else body.overrides.model_dump(mode="json"),
            wait_for_workers=body.wait_for_workers,
            webhook_url=body.webhook_url,
            trend_window=body.trend_window,
            min_change=body.min_change,
        )
        self._add_job(schedule)
        return schedule

    def pause(self, schedule_id: str) -> StoredSchedule:
        """Stop firing until resumed."""
        self.store.set_state(schedule_id, ScheduleState.PAUSED)
        self._remove_job(schedule_id)
        return self.store.get(schedule_id)

    def resume(self, schedule_id: str) -> StoredSchedule:
        """Fire again from now on (fires that fell while paused are not caught up)."""
        schedule = self.store.get(schedule_id)
        if schedule.state != ScheduleState.ACTIVE:
            self.store.set_state(schedule_id, ScheduleState.ACTIVE, anchor=now())
            schedule = self.store.get(schedule_id)
            self._add_job(schedule)
        return schedule

    def delete(self, schedule_id: str) -> None:
        """Stop firing for good; its fires and runs stay on record."""
        self.store.set_state(schedule_id, ScheduleState.DELETED)
        self._remove_job(schedule_id)

    def next_fire_at(self, schedule_id: str) -> dt.datetime | None:
        """When the scheduler fires the schedule next, in UTC (None while paused)."""
        job = self._scheduler.get_job(schedule_id)
        if job is None or job.next_run_time is None:
            return None
        fire: dt.datetime = job.next_run_time.astimezone(dt.UTC)
        return fire

    # ------------------------------------------------------------------ fires

    async def _catch_up_all(self) -> None:
        for schedule in self.store.live():
            if schedule.state == ScheduleState.ACTIVE:
                await self._fire(schedule.schedule_id, FireKind.CATCH_UP)

    async def _fire(self, schedule_id: str, kind: str = FireKind.SCHEDULED) -> None:
        """Start the run that is due (at most one, whatever was missed), skip it while
        the previous one runs, record the fire either way."""
        async with self._locks[schedule_id]:
            try:
                schedule = self.store.get(schedule_id)
            except UnknownScheduleError:
                self._remove_job(schedule_id)
                return
            if schedule.state != ScheduleState.ACTIVE:
                return
            trigger = parse_cron(schedule.cron, schedule.timezone)
            due, count = fires_between(trigger, schedule.fire_anchor_at, now())
            if due is None:
                return  # nothing due: a catch-up with nothing missed
            note = None
            if kind == FireKind.CATCH_UP:
                note = f"{count} fire(s) missed while the control plane was down: run once"
            elif count > 1:
                note = f"{count} fires were due at once (the scheduler was late): run once"
            previous = self.store.last_started_run(schedule_id)
            if previous is not None and self._is_running(previous):
                message = f"run {previous} of this schedule is still running"
                self.store.add_fire(schedule_id, due, kind, FireOutcome.SKIPPED, message=message)
                log.info("schedule %s: fire at %s skipped: %s", schedule_id, due, message)
                return
            body = RunCreate(
                scenario_id=schedule.scenario_id,
                overrides=None
                if schedule.overrides is None
                else RunOverrides.model_validate(schedule.overrides),
                wait_for_workers=schedule.wait_for_workers,
            )
            try:
                run_id = await self._start_run(body, schedule_id)
            except TokenbenchError as exc:
                message = describe_error(exc)
                self.store.add_fire(schedule_id, due, kind, FireOutcome.FAILED, message=message)
                log.warning("schedule %s: fire at %s failed: %s", schedule_id, due, message)
                return
            except Exception:  # a bug: logged, recorded, and the scheduler keeps going
                log.exception("schedule %s: fire at %s failed", schedule_id, due)
                message = "internal error (see the control plane's log)"
                self.store.add_fire(schedule_id, due, kind, FireOutcome.FAILED, message=message)
                return
            # A busy target queues the run instead of overlapping (docs/teams.md).
            queued = self._queued_note(run_id) if self._queued_note else None
            if queued is not None:
                note = f"{note}; {queued}" if note else queued
            self.store.add_fire(schedule_id, due, kind, FireOutcome.STARTED, run_id, note)
            log.info("schedule %s: fire at %s started run %s", schedule_id, due, run_id)

    # ------------------------------------------------------------------ ended runs

    async def _evaluate_forever(self) -> None:
        while True:
            await asyncio.sleep(EVALUATE_EVERY_S)
            try:
                await self.evaluate_ended()
            except Exception:  # logged; the next round tries again
                log.exception("schedules: judging ended runs failed")

    async def evaluate_ended(self) -> None:
        """Judge the trend of every fired run that has ended, and notify on regression."""
        for schedule_id, seq, run_id in self.store.unevaluated():
            if self._is_running(run_id):
                continue
            try:
                schedule = self.store.get(schedule_id, deleted=True)
            except UnknownScheduleError:
                continue
            regressions = await asyncio.to_thread(
                run_regressions, self.con.cursor(), schedule, run_id
            )
            self.store.set_evaluated(schedule_id, seq, regressions)
            if regressions:
                log.warning(
                    "schedule %s: run %s regressed: %s",
                    schedule_id,
                    run_id,
                    "; ".join(r["verdict"] for r in regressions),
                )
            if regressions and schedule.webhook_url and schedule.state != ScheduleState.DELETED:
                await self._notify(schedule, run_id, regressions)

    async def _notify(
        self, schedule: StoredSchedule, run_id: str, regressions: list[dict[str, Any]]
    ) -> None:
        assert schedule.webhook_url is not None
        body = regression_body(
            schedule_id=schedule.schedule_id,
            schedule_name=schedule.name,
            scenario_id=schedule.scenario_id,
            run_id=run_id,
            regressions=regressions,
        )
        delivery = await deliver(
            schedule.webhook_url,
            body,
            self.settings.egress,
            timeout_s=self.settings.schedules.webhook_timeout_s,
            attempts=self.settings.schedules.webhook_attempts,
        )
        self.store.record_webhook(
            schedule.schedule_id,
            run_id,
            delivery.attempts,
            delivery.status,
            delivery.outcome,
            delivery.message,
        )
        log.info(
            "schedule %s: webhook for run %s %s after %d tries",
            schedule.schedule_id,
            run_id,
            delivery.outcome,
            delivery.attempts,
        )
