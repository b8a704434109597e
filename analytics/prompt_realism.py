"""Planned vs server-reported prompt lengths, per stage (docs/load.md, "prompt realism")."""

from __future__ import annotations

from typing import Any

import duckdb

from analytics.sqlfiles import load_sql

_FIELDS = ("prompt_tokens_planned_mean", "prompt_tokens_reported_mean", "prompt_length_error_pct")


def with_prompt_realism(
    con: duckdb.DuckDBPyConnection, run_id: str, stages: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Stage rows with the mean planned and server-reported prompt tokens and the mean
    relative error (%); None where the server sent no usage."""
    rows = con.execute(load_sql("prompt_realism"), {"run_id": run_id}).fetchall()
    by_stage = {(r[0], r[1], r[2]): r[3:] for r in rows}
    merged = []
    for row in stages:
        values = by_stage.get((row["provider"], row["stage"], row["region"]), (None,) * 3)
        merged.append({**row, **dict(zip(_FIELDS, values, strict=True))})
    return merged
