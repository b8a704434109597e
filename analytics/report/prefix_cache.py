"""The prefix cache per stage (docs/metrics.md, "Prefix cache"): the client-observed hit
rate from usage, the planned and target rates of a workload with ``prefix_cache``, and
the cache resets sent before the stage. Shown only when some request reported cached
tokens, the workload set a target, or a reset was sent, so other runs keep their stage
rows as they were."""

from __future__ import annotations

from typing import Any

import duckdb

from analytics.sql.files import load_sql

FIELDS = (
    "cache_reported",
    "cached_tokens",
    "cache_hit_pct",
    "cache_planned_pct",
    "cache_target_pct",
    "cache_reset",
)
# Where the server-observed hit rate from telemetry (vLLM's prefix-cache queries and
# hits counters, SGLang's cache hit rate) goes beside the client's, where the
# server's own metrics give it (``with_server_hit_rate``): ``cache_server_hit_pct``.
SERVER_FIELD = "cache_server_hit_pct"


def with_prefix_cache(
    con: duckdb.DuckDBPyConnection, run_id: str, stages: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Stage rows with the prefix-cache fields (:data:`FIELDS`), if the run has any."""
    rows = con.execute(load_sql("prefix_cache"), {"run_id": run_id}).fetchall()
    shown = [r for r in rows if r[3] or r[7] is not None or r[8] is not None]
    if not shown:
        return stages
    by_stage = {(r[0], r[1], r[2]): r[3:] for r in rows}
    target = rows[0][7] if rows else None
    empty = (0, None, None, None, target, None)
    return [
        {
            **row,
            **dict(
                zip(
                    FIELDS,
                    by_stage.get((row["provider"], row["stage"], row["region"]), empty),
                    strict=True,
                )
            ),
            SERVER_FIELD: row.get(SERVER_FIELD),
        }
        for row in stages
    ]


def with_server_hit_rate(
    stages: list[dict[str, Any]], telemetry_stages: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Stage rows of a run with prefix-cache fields, with the hit rate the server's own
    metrics gave for the same provider, stage and region (telemetry_stage_figures.sql),
    in percent; unknown where the server exposed none."""
    rates = {
        (t["provider"], t["stage"], t["region"]): t.get("server_prefix_cache_hit_rate")
        for t in telemetry_stages
    }
    out = []
    for row in stages:
        rate = rates.get((row["provider"], row["stage"], row["region"]))
        if "cache_reported" in row and rate is not None:
            out.append({**row, SERVER_FIELD: 100.0 * float(rate)})
        else:
            out.append(row)
    return out
