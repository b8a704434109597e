"""Connections and ids per stage (docs/metrics.md, "Connection phases", "Response and
request ids"): requests on new and reused connections, the new ones' DNS, connect and TLS
times, TTFT of first-on-connection requests against the rest, and how many records carry
an id to join server-side figures on (the report's sections: analytics/sections/connections.py)."""

from __future__ import annotations

from typing import Any

import duckdb

from analytics.sql.files import load_sql

__all__ = ["CONNECTION_FIELDS", "with_connections"]

CONNECTION_FIELDS = (
    "records_total",
    "connections_new",
    "connections_reused",
    "dns_p50_ms",
    "dns_p99_ms",
    "connect_p50_ms",
    "connect_p99_ms",
    "tls_p50_ms",
    "tls_p99_ms",
    "ttft_new_p50_ms",
    "ttft_new_p99_ms",
    "ttft_reused_p50_ms",
    "ttft_reused_p99_ms",
    "response_id_pct",
    "request_id_pct",
)


def with_connections(
    con: duckdb.DuckDBPyConnection, run_id: str, stages: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Stage rows with a ``connections`` dict of CONNECTION_FIELDS (None for a stage
    without records); a figure nobody measured (no phase, no such request) is None."""
    rows = con.execute(load_sql("connections"), {"run_id": run_id}).fetchall()
    by_stage = {(r[0], r[1], r[2]): dict(zip(CONNECTION_FIELDS, r[3:], strict=True)) for r in rows}
    return [
        {**row, "connections": by_stage.get((row["provider"], row["stage"], row["region"]))}
        for row in stages
    ]
