"""Schedules, their fires and webhook deliveries, kept in DuckDB (schema v13).

DuckDB is the truth: the scheduler inside the control plane is rebuilt from these rows
when it starts, so a restart loses no schedule, and ``fire_anchor_at`` tells it which
fires it missed meanwhile. Every method runs on the connection it was given (the
control plane's writer, on its event loop).
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass, fields
from typing import Any

import duckdb
import orjson

from analytics.sql.results import first_row
from scenarios.errors import NotFound
from scenarios.limits import MAX_SCHEDULE_FIRES_KEPT


class ScheduleState:
    """States of a schedule (``deleted`` ones are kept for their runs' provenance)."""

    ACTIVE = "active"
    PAUSED = "paused"
    DELETED = "deleted"


class FireOutcome:
    """What a fire did."""

    STARTED = "started"  # a run was created (run_id)
    SKIPPED = "skipped"  # the schedule's previous run was still running
    FAILED = "failed"  # the run could not be created (message)


class FireKind:
    """Why a fire happened."""

    SCHEDULED = "scheduled"
    CATCH_UP = "catch_up"  # missed while the control plane was down: run once on start


class UnknownScheduleError(NotFound, LookupError):
    """No schedule with that id (or it was deleted); the one argument is the id."""

    def public_detail(self) -> object:
        """``no schedule 'ID'``."""
        return f"no schedule {self.args[0]!r}"


@dataclass(frozen=True)
class StoredSchedule:
    """A schedule as stored."""

    schedule_id: str
    name: str | None
    scenario_id: str
    cron: str
    timezone: str
    overrides: dict[str, Any] | None
    wait_for_workers: bool
    webhook_url: str | None
    trend_window: int
    min_change: float
    state: str
    created_at: dt.datetime
    fire_anchor_at: dt.datetime


_SELECT = (
    "SELECT schedule_id, name, scenario_id, cron, timezone, overrides, wait_for_workers, "
    "webhook_url, trend_window, min_change, state, created_at, fire_anchor_at FROM schedules "
)
_FIRE_KEYS = (
    "seq", "scheduled_for", "fired_at", "kind", "outcome", "run_id", "message", "evaluated_at",
    "regressions",
)  # fmt: skip


def _schedule(row: tuple[Any, ...]) -> StoredSchedule:
    values = list(row)
    values[5] = None if values[5] is None else orjson.loads(values[5])
    return StoredSchedule(*values)


def _fire(row: tuple[Any, ...]) -> dict[str, Any]:
    fire = dict(zip(_FIRE_KEYS, row, strict=True))
    fire["regressions"] = None if fire["regressions"] is None else orjson.loads(fire["regressions"])
    return fire


def now() -> dt.datetime:
    """The current instant (UTC)."""
    return dt.datetime.now(dt.UTC)


class ScheduleStore:
    """Create, read and update schedules and their fires."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def add(
        self,
        *,
        name: str | None,
        scenario_id: str,
        cron: str,
        timezone: str,
        overrides: dict[str, Any] | None,
        wait_for_workers: bool,
        webhook_url: str | None,
        trend_window: int,
        min_change: float,
    ) -> StoredSchedule:
        """Store a new active schedule; its fires start after now."""
        created = now()
        schedule = StoredSchedule(
            "sch-" + uuid.uuid4().hex[:12], name, scenario_id, cron, timezone, overrides,
            wait_for_workers, webhook_url, trend_window, min_change, ScheduleState.ACTIVE,
            created, created,
        )  # fmt: skip
        values: list[Any] = [getattr(schedule, f.name) for f in fields(schedule)]
        values[5] = None if overrides is None else orjson.dumps(overrides).decode()
        self.con.execute(
            "INSERT INTO schedules VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", values
        )
        return schedule

    def get(self, schedule_id: str, deleted: bool = False) -> StoredSchedule:
        """The live (active or paused) schedule ``schedule_id``; a deleted one too if
        ``deleted``."""
        row = first_row(
            self.con.execute(
                _SELECT + "WHERE schedule_id = ? AND state != ?",
                [schedule_id, "" if deleted else ScheduleState.DELETED],
            )
        )
        if row is None:
            raise UnknownScheduleError(schedule_id)
        return _schedule(row)

    def live(self, where: tuple[str, list[object]] = ("TRUE", [])) -> list[StoredSchedule]:
        """Every active or paused schedule (of those ``where``, a trusted SQL condition
        on ``schedules.schedule_id`` and its parameters, holds for), oldest first."""
        condition, params = where
        rows = self.con.execute(
            _SELECT + f"WHERE state != ? AND {condition} ORDER BY created_at",
            [ScheduleState.DELETED, *params],
        ).fetchall()
        return [_schedule(row) for row in rows]

    def set_state(self, schedule_id: str, state: str, anchor: dt.datetime | None = None) -> None:
        """Pause, resume (``anchor``: fires count from then, none caught up) or delete."""
        self.get(schedule_id)
        self.con.execute(
            "UPDATE schedules SET state = ?, fire_anchor_at = coalesce(?, fire_anchor_at) "
            "WHERE schedule_id = ?",
            [state, anchor, schedule_id],
        )

    def set_anchor(self, schedule_id: str, anchor: dt.datetime) -> None:
        """The fire at ``anchor`` has been handled: later ones are the next due."""
        self.con.execute(
            "UPDATE schedules SET fire_anchor_at = ? WHERE schedule_id = ?", [anchor, schedule_id]
        )

    def add_fire(
        self,
        schedule_id: str,
        scheduled_for: dt.datetime,
        kind: str,
        outcome: str,
        run_id: str | None = None,
        message: str | None = None,
    ) -> int:
        """Record a fire (and the anchor moved past it, in one transaction); returns its
        sequence number. Only the newest MAX_SCHEDULE_FIRES_KEPT fires are kept."""
        self.con.execute("BEGIN TRANSACTION")
        try:
            row = first_row(
                self.con.execute(
                    "SELECT coalesce(max(seq), 0) + 1 FROM schedule_fires WHERE schedule_id = ?",
                    [schedule_id],
                )
            )
            seq = int(row[0]) if row else 1
            self.con.execute(
                "INSERT INTO schedule_fires (schedule_id, seq, scheduled_for, fired_at, kind, "
                "outcome, run_id, message) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [schedule_id, seq, scheduled_for, now(), kind, outcome, run_id, message],
            )
            self.con.execute(
                "DELETE FROM schedule_fires WHERE schedule_id = ? AND seq <= ?",
                [schedule_id, seq - MAX_SCHEDULE_FIRES_KEPT],
            )
            self.set_anchor(schedule_id, scheduled_for)
            self.con.execute("COMMIT")
        except Exception:
            self.con.execute("ROLLBACK")
            raise
        return seq

    def fires(self, schedule_id: str, limit: int = 100) -> list[dict[str, Any]]:
        """The newest fires of a schedule, newest first, each with its run's state."""
        rows = self.con.execute(
            "SELECT f.seq, f.scheduled_for, f.fired_at, f.kind, f.outcome, f.run_id, f.message, "
            "f.evaluated_at, f.regressions, r.state "
            "FROM schedule_fires AS f LEFT JOIN runs AS r USING (run_id) "
            "WHERE f.schedule_id = ? ORDER BY f.seq DESC LIMIT ?",
            [schedule_id, limit],
        ).fetchall()
        return [{**_fire(row[:-1]), "run_state": row[-1]} for row in rows]

    def last_started_run(self, schedule_id: str) -> str | None:
        """The run of the schedule's newest fire that started one."""
        row = first_row(
            self.con.execute(
                "SELECT run_id FROM schedule_fires WHERE schedule_id = ? AND outcome = ? "
                "ORDER BY seq DESC LIMIT 1",
                [schedule_id, FireOutcome.STARTED],
            )
        )
        return None if row is None else str(row[0])

    def unevaluated(self) -> list[tuple[str, int, str]]:
        """(schedule, seq, run) of started fires whose run has ended but whose trend was
        not judged yet, oldest first."""
        rows = self.con.execute(
            "SELECT f.schedule_id, f.seq, f.run_id FROM schedule_fires AS f "
            "JOIN runs AS r USING (run_id) "
            "WHERE f.outcome = ? AND f.evaluated_at IS NULL "
            "AND r.state NOT IN ('running', 'queued') "
            "ORDER BY f.fired_at",
            [FireOutcome.STARTED],
        ).fetchall()
        return [(str(r[0]), int(r[1]), str(r[2])) for r in rows]

    def set_evaluated(self, schedule_id: str, seq: int, regressions: list[dict[str, Any]]) -> None:
        """What the trend flagged when the fire's run ended (an empty list: nothing)."""
        self.con.execute(
            "UPDATE schedule_fires SET evaluated_at = ?, regressions = ? "
            "WHERE schedule_id = ? AND seq = ?",
            [now(), orjson.dumps(regressions).decode(), schedule_id, seq],
        )

    def record_webhook(
        self,
        schedule_id: str,
        run_id: str,
        attempts: int,
        status: int | None,
        outcome: str,
        message: str | None,
    ) -> None:
        """The outcome of a webhook notification (one per schedule and run)."""
        self.con.execute(
            "INSERT OR REPLACE INTO schedule_webhooks VALUES (?, ?, ?, ?, ?, ?, ?)",
            [schedule_id, run_id, now(), attempts, status, outcome, message],
        )

    def last_webhook(self, schedule_id: str) -> dict[str, Any] | None:
        """The schedule's newest webhook notification."""
        row = first_row(
            self.con.execute(
                "SELECT run_id, sent_at, attempts, status, outcome, message FROM schedule_webhooks "
                "WHERE schedule_id = ? ORDER BY sent_at DESC LIMIT 1",
                [schedule_id],
            )
        )
        if row is None:
            return None
        keys = ("run_id", "sent_at", "attempts", "status", "outcome", "message")
        return dict(zip(keys, row, strict=True))

    def count_live(self) -> int:
        """Schedules that are active or paused (the MAX_SCHEDULES bound counts these)."""
        row = first_row(
            self.con.execute(
                "SELECT count(*) FROM schedules WHERE state != ?", [ScheduleState.DELETED]
            )
        )
        return int(row[0]) if row else 0


def record_origin(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    scenario_id: str | None,
    schedule_id: str | None,
) -> None:
    """Where a REST run came from (its stored scenario, the schedule that fired it)."""
    con.execute(
        "INSERT OR REPLACE INTO run_origins VALUES (?, ?, ?)", [run_id, scenario_id, schedule_id]
    )
