"""Printing a shadow session's paired comparison (``tokenbench shadow compare``, and
``tokenbench report`` for a run that is a shadow session)."""

from __future__ import annotations

import json
from typing import Any

import duckdb
from rich.console import Console

from analytics.render.fitted_tables import Column, fit, print_tables
from analytics.shadow.capture import comparison


def _ms(value: Any) -> str:
    return "–" if value is None else f"{value:+.1f}"


def _num(value: Any, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _pct(value: Any) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _usd(value: Any) -> str:
    return "–" if value is None else f"${value:.3f}"


def print_comparison(console: Console, session_id: str, rows: list[dict[str, Any]]) -> None:
    """Each shadow × region against the primary on the same requests, in as many tables
    as the console's width needs (analytics/render/fitted_tables.py)."""

    def few(row: dict[str, Any]) -> str:
        return "*" if row["few_pairs"] else ""

    values = {
        "pairs": [str(r["pairs"]) for r in rows],
        "err\nprimary/shadow": [
            f"{_pct(r['primary_error_rate'])} / {_pct(r['shadow_error_rate'])}" for r in rows
        ],
        "TTFT Δ\np50 ms": [_ms(r["ttft_delta_p50_ms"]) for r in rows],
        "TTFT Δ\np99 ms": [_ms(r["ttft_delta_p99_ms"]) + few(r) for r in rows],
        "TTFT shadow\nfaster": [_pct(r["ttft_shadow_faster_share"]) for r in rows],
        "E2E Δ\np50 ms": [_ms(r["e2e_delta_p50_ms"]) for r in rows],
        "E2E Δ\np99 ms": [_ms(r["e2e_delta_p99_ms"]) + few(r) for r in rows],
        "E2E shadow\nfaster": [_pct(r["e2e_shadow_faster_share"]) for r in rows],
        "out tokens\nprimary/shadow": [
            f"{_num(r['primary_completion_tokens_mean'])} / "
            f"{_num(r['shadow_completion_tokens_mean'])}"
            for r in rows
        ],
        "$/1M tok\nprimary/shadow": [
            f"{_usd(r['primary_usd_per_mtok'])} / {_usd(r['shadow_usd_per_mtok'])}" for r in rows
        ],
    }
    tables = fit(
        f"shadow session {session_id}: shadow − primary over the same requests",
        [
            Column("shadow", [str(r["shadow_provider"]) for r in rows], numeric=False),
            Column("region", [str(r["shadow_region"]) for r in rows], numeric=False),
        ],
        [Column(header, cells) for header, cells in values.items()],
        console.width,
        caption="deltas < 0: the shadow was faster · p99 over < 100 pairs is marked *",
    )
    print_tables(console, tables)


def print_shadow_report(
    console: Console, con: duckdb.DuckDBPyConnection, session_id: str, output: str = "table"
) -> None:
    """The comparison of a session as a table, or as JSON when ``output`` is ``json``."""
    rows = comparison(con, session_id)
    if output == "json":
        console.print_json(json.dumps({"session": session_id, "comparison": rows}, default=str))
    else:
        print_comparison(console, session_id, rows)
