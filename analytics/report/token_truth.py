"""Token truth per stage (docs/metrics.md, "Token counts"): which prompt counts are
unknown or were counted with the workload's tokenizer, why the answers ended, and how
long they came out against the plan; and the report's lines that say so."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import duckdb

from analytics.sql.files import load_sql

__all__ = ["SHORT_ANSWER_RATIO", "token_truth_lines", "with_token_truth"]

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


def token_truth_lines(stages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The report's notes on token counts: stages whose prompt counts are unknown, stages
    counted with the workload's tokenizer, and stages whose answers came out shorter than
    planned (with why they ended). Empty when every count is the server's and every
    answer had its planned length."""
    lines: list[str] = []
    unknown = [row for row in stages if row.get("prompt_tokens_unknown")]
    if unknown:
        lines.append(
            "prompt tokens unknown: the server sent no usage and the workload has no "
            "tokenizer (input tokens, input tok/s and token-priced cost not shown; "
            "docs/metrics.md)"
        )
        lines += [
            f"  {_where(row)}: {row['prompt_tokens_unknown']} of {row.get('ok', 0)} answers"
            for row in unknown
        ]
    counted = [row for row in stages if row.get("prompt_tokens_counted")]
    if counted:
        lines.append(
            "prompt tokens counted with the workload's tokenizer: the server sent no usage "
            "(the text alone, no chat template)"
        )
        lines += [
            f"  {_where(row)}: {row['prompt_tokens_counted']} of {row.get('ok', 0)} answers"
            for row in counted
        ]
    short = [row for row in stages if _short(row)]
    if short:
        lines.append("answers shorter than planned, output tokens planned → received (why)")
        lines += [
            f"  {_where(row)}: {row['output_tokens_planned_mean']:.0f} → "
            f"{row['output_tokens_mean']:.1f} ({row.get('finish_reasons') or 'no reason given'})"
            for row in short
        ]
    return lines


def _short(row: Mapping[str, Any]) -> bool:
    planned, received = row.get("output_tokens_planned_mean"), row.get("output_tokens_mean")
    return planned is not None and received is not None and received < SHORT_ANSWER_RATIO * planned


def _where(row: Mapping[str, Any]) -> str:
    return f"{row['provider']} s{row['stage']} {row['region']}"
