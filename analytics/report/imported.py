"""An imported run's provenance, its tool's definitions and its tool's own figures
(docs/import.md), for the report and for comparisons.

``run_import`` reads what ``analytics.store.imported_runs`` stored: which tool and
version wrote the files, their SHA-256s, the definition notes, and every figure the
tool printed, each beside the same figure computed from the stored rows where the file
had rows per request (``from_rows``: None for a summary-only file, never invented).
``definition_notes`` says which compared metrics two runs define differently.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import duckdb

from analytics.sql.results import first_row

__all__ = ["METRIC_FIGURES", "definition_notes", "printed_rows", "run_import"]

# The stage summary's column of each (figure, stat) a tool prints, to put its value
# beside tokenbench's (docs/analytics.md); a figure not here is shown alone.
_ROW_COLUMNS = {
    **{
        (figure, stat): f"{figure}_{stat}_ms"
        for figure in ("ttft", "tpot", "e2e", "itl")
        for stat in ("p50", "p90", "p95", "p99", "p999", "mean", "std")
    },
    ("output_tokens_per_s", "rate"): "output_tok_s",
    ("requests_per_s", "rate"): "request_rate",
}

# Which definition notes bear on each compared metric: a note on where time is measured
# from, or on what was sent, bears on every latency.
METRIC_FIGURES: dict[str, tuple[str, ...]] = {
    "ttft": ("ttft", "start", "workload"),
    "tpot": ("tpot", "itl", "output_tokens", "workload"),
    "e2e": ("e2e", "start", "workload"),
    "ttft_intent": ("ttft", "start", "workload"),
}


# The order the tool's figures are shown in: latencies first, as the summary table.
_FIGURE_ORDER = ("ttft", "itl", "tpot", "e2e", "output_tokens_per_s", "requests_per_s",
                 "prompt_tokens", "output_tokens")  # fmt: skip
_STAT_ORDER = ("p50", "p90", "p95", "p99", "p999", "mean", "std", "min", "max", "rate", "total")


def _reading_order(figure: dict[str, Any]) -> tuple[int, str, int, int, str]:
    def place(order: tuple[str, ...], value: str) -> int:
        return order.index(value) if value in order else len(order)

    return (
        figure["stage"],
        figure["provider"],
        place(_FIGURE_ORDER, figure["figure"]),
        place(_STAT_ORDER, figure["stat"]),
        figure["stat"],
    )


def run_import(
    con: duckdb.DuckDBPyConnection, run_id: str, stages: Sequence[dict[str, Any]]
) -> dict[str, Any] | None:
    """The import of ``run_id`` (None for a run tokenbench measured): provenance, notes,
    and the tool's figures beside the ones computed from its rows (``stages``: the
    report's summary rows)."""
    row = first_row(
        con.execute(
            "SELECT tool, tool_version, format, per_request, model, target, started_at, "
            "files, imported_at, imported_by FROM run_imports WHERE run_id = ?",
            [run_id],
        )
    )
    if row is None:
        return None
    tool, version, fmt, per_request, model, target, started, files, imported, by = row
    notes = [
        {"figure": figure, "note": note}
        for figure, note in con.execute(
            "SELECT figure, note FROM import_notes WHERE run_id = ? ORDER BY figure, note",
            [run_id],
        ).fetchall()
    ]
    by_stage = {(s["stage"], s["provider"]): s for s in stages}
    figures = []
    for stage, provider, figure, stat, value, unit in con.execute(
        "SELECT stage, provider, figure, stat, value, unit FROM import_summaries "
        "WHERE run_id = ? ORDER BY stage, provider, figure, stat",
        [run_id],
    ).fetchall():
        column = _ROW_COLUMNS.get((figure, stat))
        computed = by_stage.get((stage, provider), {}).get(column) if column else None
        figures.append(
            {
                "stage": stage,
                "provider": provider,
                "figure": figure,
                "stat": stat,
                "tool_value": value,
                "unit": unit,
                "from_rows": computed if per_request else None,
            }
        )
    figures.sort(key=_reading_order)
    return {
        "tool": tool,
        "tool_version": version,
        "format": fmt,
        "per_request": per_request,
        "model": model,
        "target": target,
        "started_at": None if started is None else started.isoformat(),
        "files": json.loads(files),
        "imported_at": imported.isoformat(),
        "imported_by": by,
        "notes": notes,
        "figures": figures,
    }


def definition_notes(metric: str, a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[str]:
    """The notes of either run on how it defines ``metric`` (a compared metric such as
    ``ttft_p50``), each prefixed by its tool; empty when both define it as tokenbench
    does, or as the same tool does."""
    figures = METRIC_FIGURES.get(metric.rsplit("_", 1)[0], ())
    sides = [side for side in (a, b) if side is not None]
    if len(sides) == 2 and sides[0]["tool"] == sides[1]["tool"]:
        return []  # the same tool on both sides: the same method
    return [
        f"{side['tool']}: {note['note']}"
        for side in sides
        for note in side["notes"]
        if note["figure"] in figures
    ]


def printed_rows(imported: dict[str, Any]) -> list[dict[str, Any]]:
    """A summary-only import's figures as summary rows a comparison reads (stage,
    provider, region and ``{figure}_{stat}_ms`` columns), each marked ``printed``: the
    tool's figures, with no rows behind them (so no interval)."""
    rows: dict[tuple[int, str], dict[str, Any]] = {}
    for f in imported["figures"]:
        if f["unit"] != "ms":
            continue
        key = (f["stage"], f["provider"])
        row = rows.setdefault(
            key, {"stage": key[0], "provider": key[1], "region": "imported", "printed": True}
        )
        row[f"{f['figure']}_{f['stat']}_ms"] = f["tool_value"]
    return [rows[key] for key in sorted(rows)]
