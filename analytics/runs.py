"""Run, shard and attempt state in DuckDB, written by the control plane as events arrive."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import duckdb

from scenarios.model import Scenario


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True, slots=True)
class PlannedShard:
    """A shard row to create."""

    shard_id: str
    stage: int
    provider: str
    region: str
    concurrency: int
    planned_requests: int | None


class RunStore:
    """Writes the lifecycle of runs; one writer connection per database file."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def create_run(self, run_id: str, scenario: Scenario, shards: list[PlannedShard]) -> None:
        """Record a new run and its planned shards."""
        self.con.execute("BEGIN TRANSACTION")
        self.con.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?, NULL, 'running')",
            [run_id, scenario.name, scenario.model_dump_json(), _now()],
        )
        self.con.executemany(
            "INSERT INTO shards VALUES (?, ?, ?, ?, ?, ?, ?, 'planned', NULL, 0, NULL)",
            [
                [
                    run_id,
                    s.shard_id,
                    s.stage,
                    s.provider,
                    s.region,
                    s.concurrency,
                    s.planned_requests,
                ]
                for s in shards
            ],
        )
        self.con.execute("COMMIT")

    def attempt_started(self, run_id: str, shard_id: str, attempt: int, worker: str) -> None:
        """A worker began an attempt; earlier unfinished attempts are abandoned."""
        self.con.execute(
            "UPDATE shard_attempts SET state = 'abandoned' "
            "WHERE run_id = ? AND shard_id = ? AND attempt < ? AND state = 'running'",
            [run_id, shard_id, attempt],
        )
        self.con.execute(
            "INSERT OR REPLACE INTO shard_attempts "
            "VALUES (?, ?, ?, ?, 'running', ?, NULL, NULL, NULL, NULL)",
            [run_id, shard_id, attempt, worker, _now()],
        )
        self.con.execute(
            "UPDATE shards SET state = 'running' "
            "WHERE run_id = ? AND shard_id = ? AND state = 'planned'",
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
    ) -> None:
        """An attempt finished or failed (as the worker reported)."""
        self.con.execute(
            "UPDATE shard_attempts SET state = ?, finished_at = ?, records = ?, batches = ?, "
            "message = ? "
            "WHERE run_id = ? AND shard_id = ? AND attempt = ?",
            [state, _now(), records, batches, message, run_id, shard_id, attempt],
        )

    def shard_done(
        self, run_id: str, shard_id: str, state: str, attempt: int | None, message: str | None
    ) -> None:
        """Settle a shard: its accepted attempt (whose records count) and final state."""
        self.con.execute(
            "UPDATE shards SET state = ?, accepted_attempt = ?, message = ?, "
            "records = (SELECT count(*) FROM request_records r WHERE r.run_id = ? "
            "           AND r.shard_id = ? AND r.attempt = ?) "
            "WHERE run_id = ? AND shard_id = ?",
            [state, attempt, message, run_id, shard_id, attempt, run_id, shard_id],
        )

    def finish_run(self, run_id: str, state: str) -> None:
        """Mark the run finished, failed or cancelled."""
        self.con.execute(
            "UPDATE runs SET state = ?, finished_at = ? WHERE run_id = ?", [state, _now(), run_id]
        )
