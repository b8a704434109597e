"""Token truth per stage (docs/metrics.md, "Token counts"): which prompt counts are
unknown or were counted with the workload's tokenizer, why the answers ended, and how
long they came out against the plan (the report's section: analytics/sections/workload.py)."""

from __future__ import annotations

from typing import Any

import duckdb

from analytics.sql.files import load_sql

__all__ = ["SHORT_ANSWER_RATIO", "with_token_truth"]

_FIELDS = (
    "prompt_tokens_unknown",
    "prompt_tokens_counted",
    "finish_reasons",
    "output_tokens_planned_mean",
    "output_tokens_mean",
)
_NONE = (0, 0, None, None, None)
# Answers are called short when their mean length is under this share of the plan.
SHORT_ANSWER_RATIO = 0.99


def with_token_truth(
    con: duckdb.DuckDBPyConnection, run_id: str, stages: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Stage rows with, over their successful requests: ``prompt_tokens_unknown`` (no
    prompt count: the server reported none and the workload has no tokenizer),
    ``prompt_tokens_counted`` (counted with the workload's tokenizer), ``finish_reasons``
    (e.g. ``"length=38, stop=2"``; None when the dialect never says) and the mean planned
    and received output tokens."""
    rows = con.execute(load_sql("token_truth"), {"run_id": run_id}).fetchall()
    by_stage = {(r[0], r[1], r[2]): r[3:] for r in rows}
    return [
        {
            **row,
            **dict(
                zip(
                    _FIELDS,
                    by_stage.get((row["provider"], row["stage"], row["region"]), _NONE),
                    strict=True,
                )
            ),
        }
        for row in stages
    ]
