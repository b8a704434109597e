"""Shadow-traffic sessions in DuckDB: their tables, captures, paired views and comparison.

A session is a run (``runs``) whose shards are record streams rather than planned work:
``primary`` (the gateway's records of the live provider) and ``shadow.<provider>.<region>``
(the workers' records of each shadow provider). Their shard rows are created with
accepted attempt 1 when the session opens, so session records appear in the ``requests``
view like any run's. The tables are in ``sql/shadow_schema.sql``, the paired views in
``sql/views/*_shadow_*.sql`` (created on connect with every view); every query here takes
a connection and binds its parameters (docs/shadow.md).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import orjson
import pyarrow as pa

from analytics.sql.results import first_row
from analytics.store.db import load_sql

__all__ = [
    "CAPTURE_SCHEMA",
    "ReplayEntry",
    "SessionShard",
    "activate_session",
    "close_session",
    "comparison",
    "ensure_shadow_schema",
    "ingest_captures",
    "is_session",
    "pairs",
    "register_session",
    "replay_entries",
    "session_ids",
    "session_summary",
]

CAPTURE_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("request_key", pa.string()),
        ("seq", pa.int64()),
        ("gateway", pa.string()),
        ("received_at", pa.timestamp("ns", tz="UTC")),
        ("stream", pa.bool_()),
        ("sampled", pa.bool_()),
        ("enqueued", pa.bool_()),
        ("prompt_chars", pa.int32()),
        ("prompt_sha256", pa.string()),
        ("max_tokens", pa.int32()),
        ("messages", pa.string()),
    ]
)


@dataclass(frozen=True, slots=True)
class SessionShard:
    """One record stream of a session, as a shard row."""

    shard_id: str
    provider: str
    region: str


@dataclass(frozen=True, slots=True)
class ReplayEntry:
    """One captured request that can be re-sent."""

    timestamp_s: float
    messages: list[dict[str, Any]]
    max_tokens: int | None


def ensure_shadow_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create the session tables if missing (the paired views are created on connect,
    with every view: sql/views/)."""
    con.execute(load_sql("shadow_schema"))


def register_session(
    con: duckdb.DuckDBPyConnection, run_id: str, name: str, config_json: str
) -> None:
    """Record that ``run_id`` is a shadow session (before its run row is created, so a
    control plane restarted in between never mistakes it for a staged run)."""
    con.execute(
        "INSERT INTO shadow_sessions VALUES (?, ?, ?, ?)",
        [run_id, name, config_json, dt.datetime.now(dt.UTC)],
    )


def activate_session(
    con: duckdb.DuckDBPyConnection, run_id: str, shards: Sequence[SessionShard]
) -> None:
    """Make the session's shards count from the start: running, accepted attempt 1."""
    con.execute(
        "UPDATE shards SET state = 'running', accepted_attempt = 1 "
        "WHERE run_id = ? AND shard_id IN (SELECT unnest(?))",
        [run_id, [s.shard_id for s in shards]],
    )


def close_session(con: duckdb.DuckDBPyConnection, run_id: str) -> None:
    """Settle the session's shards as finished with their record counts."""
    con.execute(
        "UPDATE shards SET state = 'finished', "
        "records = (SELECT count(*) FROM request_records r "
        "           WHERE r.run_id = shards.run_id AND r.shard_id = shards.shard_id) "
        "WHERE run_id = ?",
        [run_id],
    )


def session_ids(con: duckdb.DuckDBPyConnection) -> set[str]:
    """Ids of every shadow session."""
    return {str(r[0]) for r in con.execute("SELECT run_id FROM shadow_sessions").fetchall()}


def is_session(con: duckdb.DuckDBPyConnection, run_id: str) -> bool:
    """True when ``run_id`` is a shadow session (False if the table does not exist)."""
    try:
        row = first_row(con.execute("SELECT 1 FROM shadow_sessions WHERE run_id = ?", [run_id]))
    except duckdb.CatalogException:
        return False
    return row is not None


def ingest_captures(con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]]) -> int:
    """Store capture rows; a row already stored (same run and request key) is skipped, so
    a re-delivered stream entry stores nothing twice. Returns the rows offered."""
    if not rows:
        return 0
    table = pa.Table.from_pylist(rows, schema=CAPTURE_SCHEMA)
    con.register("incoming_captures", table)
    try:
        con.execute(
            "INSERT OR IGNORE INTO shadow_captures "
            "SELECT * REPLACE (messages::JSON AS messages) FROM incoming_captures"
        )
    finally:
        con.unregister("incoming_captures")
    return len(rows)


def _dicts(result: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    columns = [d[0] for d in result.description or []]
    return [dict(zip(columns, row, strict=True)) for row in result.fetchall()]


def comparison(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict[str, Any]]:
    """Per shadow provider and region: the shadow against the primary on the same requests."""
    query = (
        "SELECT * FROM shadow_comparison WHERE run_id = ? ORDER BY shadow_provider, shadow_region"
    )
    return _dicts(con.execute(query, [run_id]))


def pairs(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict[str, Any]]:
    """Every paired (primary, shadow) record of a session."""
    query = (
        "SELECT * FROM shadow_pairs WHERE run_id = ? "
        "ORDER BY primary_sent_at, shadow_provider, shadow_region"
    )
    return _dicts(con.execute(query, [run_id]))


def session_summary(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, Any] | None:
    """State and counts of a session, or None when there is no such session."""
    row = first_row(
        con.execute(
            """
        SELECT s.run_id, s.name, r.state, s.created_at, r.finished_at, s.config,
               (SELECT count(*) FROM shadow_captures c WHERE c.run_id = s.run_id),
               (SELECT count(*) FILTER (c.sampled) FROM shadow_captures c
                WHERE c.run_id = s.run_id)
        FROM shadow_sessions AS s JOIN runs AS r USING (run_id)
        WHERE s.run_id = ?
        """,
            [run_id],
        )
    )
    if row is None:
        return None
    records = con.execute(
        "SELECT shard_id, count(*) FROM request_records WHERE run_id = ? GROUP BY shard_id "
        "ORDER BY shard_id",
        [run_id],
    ).fetchall()
    return {
        "id": row[0],
        "name": row[1],
        "state": row[2],
        "created_at": row[3],
        "finished_at": row[4],
        "config": orjson.loads(row[5]),
        "requests_captured": row[6],
        "requests_sampled": row[7],
        "records": {str(shard): int(n) for shard, n in records},
    }


def replay_entries(con: duckdb.DuckDBPyConnection, run_id: str) -> list[ReplayEntry]:
    """Captured requests whose text was stored (privacy.store_text), in arrival order."""
    rows = con.execute(
        "SELECT epoch_ns(received_at), messages, max_tokens FROM shadow_captures "
        "WHERE run_id = ? AND messages IS NOT NULL ORDER BY received_at, seq",
        [run_id],
    ).fetchall()
    return [ReplayEntry(int(ns) / 1e9, orjson.loads(messages), mt) for ns, messages, mt in rows]
