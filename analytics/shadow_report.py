"""Printing a shadow session's paired comparison (``tokenbench shadow compare``, and
``tokenbench report`` for a run that is a shadow session)."""

from __future__ import annotations

import json
from typing import Any

import duckdb
from rich.console import Console
from rich.table import Table

from analytics.shadow import comparison


def _ms(value: Any) -> str:
    return "–" if value is None else f"{value:+.1f}"


def _num(value: Any, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _pct(value: Any) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _usd(value: Any) -> str:
    return "–" if value is None else f"${value:.3f}"


def print_comparison(console: Console, session_id: str, rows: list[dict[str, Any]]) -> None:
    """One table: each shadow × region against the primary on the same requests."""
    table = Table(
        title=f"shadow session {session_id}: shadow − primary over the same requests",
        caption="deltas < 0: the shadow was faster · p99 over < 100 pairs is marked *",
    )
    for header in (
        "shadow",
        "region",
        "pairs",
        "err primary/shadow",
        "TTFT Δ p50 ms",
        "TTFT Δ p99 ms",
        "TTFT shadow faster",
        "E2E Δ p50 ms",
        "E2E Δ p99 ms",
        "E2E shadow faster",
        "out tokens primary/shadow",
        "$/1M tok primary/shadow",
    ):
        table.add_column(header, justify="left" if header in ("shadow", "region") else "right")
    for row in rows:
        few = "*" if row["few_pairs"] else ""
        table.add_row(
            str(row["shadow_provider"]),
            str(row["shadow_region"]),
            str(row["pairs"]),
            f"{_pct(row['primary_error_rate'])} / {_pct(row['shadow_error_rate'])}",
            _ms(row["ttft_delta_p50_ms"]),
            _ms(row["ttft_delta_p99_ms"]) + few,
            _pct(row["ttft_shadow_faster_share"]),
            _ms(row["e2e_delta_p50_ms"]),
            _ms(row["e2e_delta_p99_ms"]) + few,
            _pct(row["e2e_shadow_faster_share"]),
            f"{_num(row['primary_completion_tokens_mean'])} / "
            f"{_num(row['shadow_completion_tokens_mean'])}",
            f"{_usd(row['primary_usd_per_mtok'])} / {_usd(row['shadow_usd_per_mtok'])}",
        )
    console.print(table)


def print_shadow_report(
    console: Console, con: duckdb.DuckDBPyConnection, session_id: str, output: str = "table"
) -> None:
    """The comparison of a session as a table, or as JSON when ``output`` is ``json``."""
    rows = comparison(con, session_id)
    if output == "json":
        console.print_json(json.dumps({"session": session_id, "comparison": rows}, default=str))
    else:
        print_comparison(console, session_id, rows)
