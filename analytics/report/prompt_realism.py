"""Planned vs server-reported prompt lengths, per stage (docs/lengths.md): after the
calibration warm-up, and during it."""

from __future__ import annotations

from typing import Any

import duckdb

from analytics.sql.files import load_sql

_FIELDS = (
    "prompt_tokens_planned_mean",
    "prompt_tokens_reported_mean",
    "prompt_length_error_pct",
    "prompt_length_warmup_error_pct",
    "prompt_warmup_requests",
    "prompt_length_source",
    "prompt_tokens_per_word",
    "prompt_template_tokens",
)


def with_prompt_realism(
    con: duckdb.DuckDBPyConnection, run_id: str, stages: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Stage rows with the mean planned and server-reported prompt tokens and the mean
    relative error (%) after warm-up (None where the server sent no usage), the error
    of the calibration warm-up requests and their number, how the planned lengths were
    made (``prompt_length_source``) and the calibration used (tokens per word, template
    tokens)."""
    rows = con.execute(load_sql("prompt_realism"), {"run_id": run_id}).fetchall()
    by_stage = {(r[0], r[1], r[2]): r[3:] for r in rows}
    merged = []
    for row in stages:
        values = by_stage.get((row["provider"], row["stage"], row["region"]), (None,) * 8)
        merged.append({**row, **dict(zip(_FIELDS, values, strict=True))})
    return merged
