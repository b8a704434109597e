"""The run report, computed in DuckDB SQL from the raw request records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb

from analytics.db import load_sql


@dataclass(frozen=True)
class RunReport:
    """A run's identity and its per provider × stage × region summary rows."""

    run_id: str
    name: str
    state: str
    shards: list[dict[str, Any]]
    stages: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "run_id": self.run_id,
            "name": self.name,
            "state": self.state,
            "shards": self.shards,
            "stages": self.stages,
        }


class UnknownRunError(LookupError):
    """No run with that id in the database."""


def _rows(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    columns = [d[0] for d in cursor.description or []]
    return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def build_report(con: duckdb.DuckDBPyConnection, run_id: str) -> RunReport:
    """Report of ``run_id`` (raises UnknownRunError if there is none)."""
    run = con.execute("SELECT name, state FROM runs WHERE run_id = ?", [run_id]).fetchone()
    if run is None:
        raise UnknownRunError(run_id)
    stages = _rows(con.execute(load_sql("stage_summary"), {"run_id": run_id}))
    shards = _rows(
        con.execute(
            "SELECT shard_id, stage, provider, region, state, accepted_attempt, records, message, "
            "(SELECT count(*) FROM shard_attempts a WHERE a.run_id = s.run_id "
            " AND a.shard_id = s.shard_id) AS attempts "
            "FROM shards s WHERE run_id = ? ORDER BY stage, provider, region",
            [run_id],
        )
    )
    return RunReport(run_id, str(run[0]), str(run[1]), shards, stages)


def latest_run_id(con: duckdb.DuckDBPyConnection) -> str | None:
    """Id of the most recently created run, if any."""
    row = con.execute("SELECT run_id FROM runs ORDER BY created_at DESC LIMIT 1").fetchone()
    return None if row is None else str(row[0])
