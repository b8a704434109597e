"""Multi-turn sessions in the report (docs/workloads.md): figures by turn index and how
sessions ended. Both are empty for a run without sessions, so its report is unchanged.

By turn: the turns sent and succeeded, TTFT p50/p99 and ITL p50 of the successful
ones, the mean context tokens sent with the turn and the mean server-reported prompt
tokens (``session_turns.sql``). Where a provider caches prefixes, later turns carry
more context at a TTFT that does not grow with it. Sessions: how many ran per provider,
stage and region, their mean turns sent and planned, and how many ended for each reason
(``session_ends.sql``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb

from analytics.sql.files import load_sql

__all__ = [
    "ENDS_HEADER",
    "ENDS_TITLE",
    "TURNS_HEADER",
    "TURNS_NOTE",
    "TURNS_TITLE",
    "end_rows",
    "session_ends",
    "session_turns",
    "turn_rows",
]

TURNS_TITLE = "Sessions by turn"
TURNS_HEADER = (
    "provider", "stage", "region", "turn", "n", "ok", "TTFT p50", "TTFT p99", "ITL p50",
    "context tok", "prompt tok",
)  # fmt: skip
TURNS_NOTE = (
    "ms over successful turns; context tok: mean tokens of the earlier turns sent with "
    "the turn (user messages as planned, answers as counted); prompt tok: mean "
    "server-reported prompt tokens (docs/workloads.md)"
)
ENDS_TITLE = "Sessions"
ENDS_HEADER = (
    "provider", "stage", "region", "sessions", "turns mean", "planned mean", "done",
    "error", "context cap", "stage end",
)  # fmt: skip


def _rows(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    columns = [d[0] for d in cursor.description or []]
    return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def session_turns(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict[str, Any]]:
    """The run's per provider × stage × region × turn rows (none without sessions)."""
    return _rows(con.execute(load_sql("session_turns"), {"run_id": run_id}))


def session_ends(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict[str, Any]]:
    """The run's per provider × stage × region session rows (none without sessions)."""
    return _rows(con.execute(load_sql("session_ends"), {"run_id": run_id}))


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def _mean(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def turn_rows(turns: Sequence[dict[str, Any]]) -> list[list[str]]:
    """The by-turn table of the text formats (:data:`TURNS_HEADER`)."""
    return [
        [
            str(t["provider"]), str(t["stage"]), str(t["region"]), str(t["turn"]),
            f"{t['requests']:,}", f"{t['ok']:,}", _ms(t["ttft_p50_ms"]), _ms(t["ttft_p99_ms"]),
            "–" if t["itl_p50_ms"] is None else f"{t['itl_p50_ms']:,.2f}",
            _mean(t["context_tokens_mean"]), _mean(t["prompt_tokens_mean"]),
        ]
        for t in turns
    ]  # fmt: skip


def end_rows(ends: Sequence[dict[str, Any]]) -> list[list[str]]:
    """The sessions table of the text formats (:data:`ENDS_HEADER`); sessions stopped
    while waiting for their next turn count under ``stage end``."""
    return [
        [
            str(e["provider"]), str(e["stage"]), str(e["region"]), f"{e['sessions']:,}",
            f"{e['turns_mean']:.2f}", f"{e['turns_planned_mean']:.2f}", f"{e['ended_done']:,}",
            f"{e['ended_error']:,}", f"{e['ended_context_cap']:,}",
            f"{e['ended_stage_end'] + e['unended']:,}",
        ]
        for e in ends
    ]  # fmt: skip
