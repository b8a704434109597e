"""Run, shard and attempt state in DuckDB, written by the control plane as events arrive."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import duckdb

from analytics.sql.results import first_row
from analytics.store.dimensions import write_dimensions
from analytics.store.summaries import store_shard_summary
from scenarios.model import Scenario
from scenarios.wire.contract import ShardSpec


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """Statements in one transaction: committed together, or rolled back together on any
    exception, so a failed write never leaves the connection in an aborted transaction
    (where every later statement would fail until a restart)."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield
        con.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(duckdb.Error):  # a failed COMMIT has already ended it
            con.execute("ROLLBACK")
        raise


@dataclass(frozen=True, slots=True)
class PlannedShard:
    """A shard row to create.

    ``concurrency`` is this shard's share of its stage (a part of a split level);
    ``stage_concurrency`` the stage's level (None: the shard is the whole stage, so its
    share). ``spec`` is what the shard is dispatched with, stored so that a restart or a
    view reads the plan instead of re-planning it (None for shards that are not
    dispatched, e.g. a shadow session's).
    """

    shard_id: str
    stage: int
    provider: str
    region: str
    concurrency: int
    planned_requests: int | None
    stage_concurrency: int | None = None
    spec: ShardSpec | None = None


@dataclass(frozen=True, slots=True)
class StoredShard:
    """A shard of a run's stored plan."""

    stage_concurrency: int
    spec: ShardSpec


@dataclass(frozen=True, slots=True)
class ShardRecovery:
    """A shard as stored, for resuming a run."""

    shard_id: str
    state: str
    message: str | None
    dispatches: int
    attempt: int | None
    worker: str | None
    finished_attempt: int | None
    batches: int | None
    records: int
    ingested: list[tuple[int, int]]


@dataclass(frozen=True, slots=True)
class CacheReset:
    """One cache reset's outcome, as a worker reported it."""

    run_id: str
    stage: int
    provider: str
    region: str
    worker: str | None
    shard_id: str
    attempt: int
    started_at: float | None  # epoch seconds
    status: str
    http_status: int | None
    message: str | None


class RunStore:
    """Writes the lifecycle of runs; one writer connection per database file."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def create_run(
        self,
        run_id: str,
        scenario: Scenario,
        shards: list[PlannedShard],
        also: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
    ) -> None:
        """Record a new run and its planned shards (all or nothing, with what ``also``
        writes in the same transaction)."""
        with transaction(self.con):
            self.con.execute(
                # A queued run (docs/teams.md) already has its row: it now starts.
                "INSERT INTO runs VALUES (?, ?, ?, ?, NULL, 'running') ON CONFLICT (run_id) "
                "DO UPDATE SET name = excluded.name, scenario = excluded.scenario, "
                "created_at = excluded.created_at, state = 'running' "
                "WHERE runs.state = 'queued'",
                [run_id, scenario.name, scenario.model_dump_json(), _now()],
            )
            write_dimensions(self.con, run_id, scenario)
            self._insert_shards(run_id, shards, 0)
            if also is not None:
                also(self.con)

    def append_shards(self, run_id: str, shards: Sequence[PlannedShard]) -> None:
        """Add the shards of a stage decided while the run goes to its stored plan, after
        the shards planned so far (the caller holds the transaction)."""
        row = first_row(
            self.con.execute(
                "SELECT coalesce(max(plan_position) + 1, 0) FROM shards WHERE run_id = ?", [run_id]
            )
        )
        self._insert_shards(run_id, shards, int(row[0]) if row else 0)

    def _insert_shards(self, run_id: str, shards: Sequence[PlannedShard], first: int) -> None:
        self.con.executemany(
            "INSERT INTO shards (run_id, shard_id, stage, provider, region, concurrency, "
            "planned_requests, state, accepted_attempt, records, message, dispatches, "
            "stage_concurrency, plan_position, spec) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, 'planned', NULL, 0, NULL, 0, ?, ?, ?)",
            [
                [
                    run_id,
                    s.shard_id,
                    s.stage,
                    s.provider,
                    s.region,
                    s.concurrency,
                    s.planned_requests,
                    s.concurrency if s.stage_concurrency is None else s.stage_concurrency,
                    first + position,
                    None if s.spec is None else s.spec.model_dump_json(),
                ]
                for position, s in enumerate(shards)
            ],
        )

    def attempt_started(self, run_id: str, shard_id: str, attempt: int, worker: str) -> None:
        """A worker began an attempt; earlier unfinished attempts are abandoned."""
        with transaction(self.con):
            self.con.execute(
                "UPDATE shard_attempts SET state = 'abandoned' "
                "WHERE run_id = ? AND shard_id = ? AND attempt < ? AND state = 'running'",
                [run_id, shard_id, attempt],
            )
            self.con.execute(
                "INSERT OR REPLACE INTO shard_attempts (run_id, shard_id, attempt, worker, "
                "state, started_at) VALUES (?, ?, ?, ?, 'running', ?)",
                [run_id, shard_id, attempt, worker, _now()],
            )
            self.con.execute(
                "UPDATE shards SET state = 'running' "
                "WHERE run_id = ? AND shard_id = ? AND state IN ('planned', 'dispatched')",
                [run_id, shard_id],
            )

    def attempt_ended(
        self,
        run_id: str,
        shard_id: str,
        attempt: int,
        state: str,
        records: int | None,
        batches: int | None,
        message: str | None,
        health: dict[str, str] | None = None,
    ) -> None:
        """An attempt finished or failed (as the worker reported, with its client's
        self-measurement when it sent one)."""
        self.con.execute(
            "UPDATE shard_attempts SET state = ?, finished_at = ?, records = ?, batches = ?, "
            "message = ?, health = ? "
            "WHERE run_id = ? AND shard_id = ? AND attempt = ?",
            [
                state,
                _now(),
                records,
                batches,
                message,
                json.dumps(health) if health else None,
                run_id,
                shard_id,
                attempt,
            ],
        )

    def cache_reset(self, reset: CacheReset) -> None:
        """A cache reset a worker sent before a stage's load, with its outcome
        (docs/providers.md, "Cache reset")."""
        started = dt.datetime.fromtimestamp(reset.started_at, dt.UTC) if reset.started_at else None
        self.con.execute(
            "INSERT INTO cache_resets (run_id, stage, provider, region, worker, shard_id, "
            "attempt, started_at, status, http_status, message) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                reset.run_id,
                reset.stage,
                reset.provider,
                reset.region,
                reset.worker,
                reset.shard_id,
                reset.attempt,
                started,
                reset.status,
                reset.http_status,
                reset.message,
            ],
        )

    def shard_done(
        self, run_id: str, shard_id: str, state: str, attempt: int | None, message: str | None
    ) -> None:
        """Settle a shard: its accepted attempt (whose records count) and final state, and
        the pre-aggregates the report of a large run reads (analytics/store/summaries.py)."""
        with transaction(self.con):
            self.con.execute(
                "UPDATE shards SET state = ?, accepted_attempt = ?, message = ?, "
                "records = (SELECT count(*) FROM request_records r WHERE r.run_id = ? "
                "           AND r.shard_id = ? AND r.attempt = ?) "
                "WHERE run_id = ? AND shard_id = ?",
                [state, attempt, message, run_id, shard_id, attempt, run_id, shard_id],
            )
            if attempt is not None:
                # A shard that never started has no records and never had pre-aggregates:
                # skipping the scans keeps settling thousands of them (a cancelled or
                # worker-less run) cheap on the control loop.
                store_shard_summary(self.con, run_id, shard_id)

    def settle_unstarted(
        self, run_id: str, shard_ids: list[str], state: str, message: str | None
    ) -> None:
        """Settle shards that never started (no attempt, so no records and no
        pre-aggregates) in one statement: cancelling or failing a run of thousands of
        shards costs one UPDATE, not one transaction per shard on the control loop."""
        if not shard_ids:
            return
        self.con.execute(
            "UPDATE shards SET state = ?, accepted_attempt = NULL, message = ?, records = 0 "
            "WHERE run_id = ? AND list_contains(?, shard_id)",
            [state, message, run_id, shard_ids],
        )

    def shard_dispatched(self, run_id: str, shard_id: str, dispatches: int) -> None:
        """The shard's task is being sent (for the ``dispatches``-th time)."""
        self.con.execute(
            "UPDATE shards SET state = 'dispatched', dispatches = ? "
            "WHERE run_id = ? AND shard_id = ?",
            [dispatches, run_id, shard_id],
        )

    def scenario_json(self, run_id: str) -> str:
        """The scenario a run was created with."""
        row = first_row(self.con.execute("SELECT scenario FROM runs WHERE run_id = ?", [run_id]))
        if row is None:
            raise KeyError(run_id)
        return str(row[0])

    def stored_plan(self, run_id: str) -> list[StoredShard] | None:
        """The run's shards as planned when it was created, in plan order; None when
        the run was stored before plans were (schema v7) and must be re-planned."""
        rows = self.con.execute(
            "SELECT stage_concurrency, spec FROM shards WHERE run_id = ? "
            "ORDER BY plan_position, shard_id",
            [run_id],
        ).fetchall()
        if not rows or any(r[1] is None for r in rows):
            return None
        return [StoredShard(int(r[0]), ShardSpec.model_validate_json(r[1])) for r in rows]

    def running_runs(self) -> list[str]:
        """Ids of runs not yet finished, oldest first (resumed after a restart)."""
        rows = self.con.execute(
            "SELECT run_id FROM runs WHERE state = 'running' ORDER BY created_at"
        ).fetchall()
        return [str(r[0]) for r in rows]

    def records_count(self, run_id: str) -> int:
        """Rows stored for the run (all attempts)."""
        row = first_row(
            self.con.execute("SELECT count(*) FROM request_records WHERE run_id = ?", [run_id])
        )
        return int(row[0]) if row else 0

    def shard_states(self, run_id: str) -> list[ShardRecovery]:
        """Everything needed to resume each shard of a run."""
        rows = self.con.execute(
            """
            SELECT s.shard_id, s.state, s.message, s.dispatches,
                   a.attempt, a.worker, f.attempt, f.batches, coalesce(s.records, 0),
                   (SELECT list((b.attempt, b.n)) FROM (
                        SELECT attempt, count(*) AS n FROM ingested_batches i
                        WHERE i.run_id = s.run_id AND i.shard_id = s.shard_id
                        GROUP BY attempt) AS b)
            FROM shards AS s
            LEFT JOIN (SELECT shard_id, max(attempt) AS attempt, arg_max(worker, attempt) AS worker
                       FROM shard_attempts WHERE run_id = $run GROUP BY shard_id) AS a
                   USING (shard_id)
            LEFT JOIN (SELECT shard_id, max(attempt) AS attempt,
                              arg_max(batches, attempt) AS batches
                       FROM shard_attempts WHERE run_id = $run AND state = 'finished'
                       GROUP BY shard_id) AS f
                   USING (shard_id)
            WHERE s.run_id = $run
            """,
            {"run": run_id},
        ).fetchall()
        return [
            ShardRecovery(
                shard_id=r[0],
                state=r[1],
                message=r[2],
                dispatches=r[3],
                attempt=r[4],
                worker=r[5],
                finished_attempt=r[6],
                batches=r[7],
                records=r[8],
                ingested=[(int(p[0]), int(p[1])) for p in (r[9] or [])],
            )
            for r in rows
        ]

    def finish_run(self, run_id: str, state: str) -> None:
        """Mark the run finished, failed or cancelled."""
        self.con.execute(
            "UPDATE runs SET state = ?, finished_at = ? WHERE run_id = ?", [state, _now(), run_id]
        )
