"""Storing what a run's simulated upstreams logged (docs/failover.md, "Attribution").

``tokenbench run`` reads each upstream's ``GET /tokenbench/requests`` while the run goes
on and stores the entries here (``upstream_requests``), and at the end one row per
upstream saying how many entries it stored and how many the bounded log had dropped
before they were read (``upstream_logs``). Re-reading an entry is harmless: the table
is keyed by run, upstream and the upstream's sequence number.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb
import pyarrow as pa

__all__ = ["store_upstream_entries", "store_upstream_summary"]

_ENTRY_SCHEMA = pa.schema(
    [
        pa.field("seq", pa.int64()),
        pa.field("received_at_ns", pa.timestamp("ns", tz="UTC")),
        pa.field("request_id", pa.string()),
        pa.field("prompt_hash", pa.string()),
        pa.field("status", pa.int32()),
        pa.field("outcome", pa.string()),
        pa.field("stall_ms", pa.float64()),
    ]
)


def store_upstream_entries(
    con: duckdb.DuckDBPyConnection, run_id: str, upstream: str, entries: Sequence[dict[str, Any]]
) -> int:
    """Store log ``entries`` of ``upstream`` (as the simulator serves them); returns how
    many there were."""
    if not entries:
        return 0
    table = pa.Table.from_pylist(
        [{name: entry.get(name) for name in _ENTRY_SCHEMA.names} for entry in entries],
        schema=_ENTRY_SCHEMA,
    )
    con.register("upstream_entries_batch", table)
    try:
        con.execute(
            "INSERT OR IGNORE INTO upstream_requests "
            "SELECT ?, ?, seq, received_at_ns, request_id, "
            "prompt_hash, status, outcome, stall_ms FROM upstream_entries_batch",
            [run_id, upstream],
        )
    finally:
        con.unregister("upstream_entries_batch")
    return len(entries)


def store_upstream_summary(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    upstream: str,
    port: int,
    missed: int,
    started_at_ns: int | None,
) -> None:
    """The upstream's row of ``upstream_logs``: entries stored (counted from the table)
    and ``missed`` (dropped by its log before they were read)."""
    started = pa.table({"started_at": pa.array([started_at_ns], pa.timestamp("ns", tz="UTC"))})
    con.register("upstream_started", started)
    try:
        con.execute(
            "INSERT OR REPLACE INTO upstream_logs "
            "SELECT ?, ?, ?, (SELECT count(*) FROM upstream_requests WHERE run_id = ? "
            "AND upstream = ?), ?, started_at FROM upstream_started",
            [run_id, upstream, port, run_id, upstream, missed],
        )
    finally:
        con.unregister("upstream_started")
