"""Where a first token's time went, per stage and provider (docs/metrics.md, "Server
timings"): server queue, server prefill and network + client, from the server timings
joined to each record (the view ``request_server_timings``: in-band figures and OTLP
spans). A stage with no joined request has its figures unknown (None), never zero.
"""

from __future__ import annotations

from typing import Any

import duckdb

from analytics.sql.files import load_sql

# The three parts of a TTFT, in the order they happen (the chart stacks them so).
PARTS = (
    ("queue", "server queue"),
    ("prefill", "server prefill"),
    ("network_client", "network + client"),
)


def server_timings(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict[str, Any]]:
    """One row per stage and provider that has successful requests: ``requests``,
    ``joined`` (with a server TTFT), ``joined_share``, and p50/p99 ms of each part."""
    cursor = con.execute(load_sql("server_timings"), {"run_id": run_id})
    columns = [d[0] for d in cursor.description or []]
    return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def any_joined(rows: list[dict[str, Any]]) -> bool:
    """Whether any stage of the run has a server timing at all."""
    return any(row["joined"] for row in rows)
