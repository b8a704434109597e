"""Tool calls per stage (workload.tools, docs/metrics.md): shown only when some request
of the run carried tools, so runs without tools keep their stage rows as they were."""

from __future__ import annotations

from typing import Any

import duckdb

from analytics.sql.files import load_sql

_FIELDS = ("tool_requests", "tool_call_pct", "tool_call_p50_ms")


def with_tool_calls(
    con: duckdb.DuckDBPyConnection, run_id: str, stages: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Stage rows with the requests that carried tools, the share of them answered with a
    tool call (%) and the median ms to the first tool-call delta, if any carried tools."""
    rows = con.execute(load_sql("tool_calls"), {"run_id": run_id}).fetchall()
    if not any(row[3] for row in rows):
        return stages
    by_stage = {(r[0], r[1], r[2]): r[3:] for r in rows}
    return [
        {
            **row,
            **dict(
                zip(
                    _FIELDS,
                    by_stage.get((row["provider"], row["stage"], row["region"]), (0, None, None)),
                    strict=True,
                )
            ),
        }
        for row in stages
    ]
