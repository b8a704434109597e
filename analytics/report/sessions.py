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

from typing import Any

import duckdb

from analytics.sql.files import load_sql

__all__ = [
    "ENDS_TITLE",
    "TURNS_NOTE",
    "TURNS_TITLE",
    "session_ends",
    "session_turns",
]

TURNS_TITLE = "Sessions by turn"
TURNS_NOTE = (
    "ms over successful turns; context tok: mean tokens of the earlier turns sent with "
    "the turn (user messages as planned, answers as counted); prompt tok: mean "
    "server-reported prompt tokens (docs/workloads.md)"
)
ENDS_TITLE = "Sessions"


def _rows(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    columns = [d[0] for d in cursor.description or []]
    return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def session_turns(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict[str, Any]]:
    """The run's per provider × stage × region × turn rows (none without sessions)."""
    return _rows(con.execute(load_sql("session_turns"), {"run_id": run_id}))


def session_ends(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict[str, Any]]:
    """The run's per provider × stage × region session rows (none without sessions)."""
    return _rows(con.execute(load_sql("session_ends"), {"run_id": run_id}))
