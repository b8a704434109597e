"""The summary table (per provider × stage × region, its columns from the registry of
analytics/report/columns.py) and the latency percentiles per metric."""

from __future__ import annotations

from typing import TYPE_CHECKING

from analytics.report.columns import ROW_KEYS, ReportColumn, columns
from analytics.report.formatting import (
    CAPTION,
    LOW_SAMPLE_NOTE,
    PERCENTILE_HEADER,
    method_note,
    percentile_rows,
)
from analytics.sections.model import MISSING, Column, Kind, Section, SectionOptions
from analytics.sections.registry import section

if TYPE_CHECKING:
    from analytics.report.build import RunReport

SUMMARY_TITLE = "Summary"
PERCENTILES_TITLE = "Latency percentiles, mean and standard deviation (ms)"


def _summary_kind(column: ReportColumn) -> Kind:
    # The kind of a registry column's values (its cells are written by its formatter).
    if not column.numeric:
        return "text"
    if column.unit == "ms":
        return "ms"
    if column.unit.startswith("USD"):
        return "usd"
    if column.unit == "%":
        return "percent"
    return "float" if column.unit else "int"


@section(order=20)
def summary(report: RunReport, options: SectionOptions) -> list[Section]:
    """The per provider × stage × region table: ``options.summary`` columns (default: the
    ``summary`` set), percentiles with their interval when ``options.interval``."""
    shown = columns("summary") if options.summary is None else tuple(options.summary)
    cols = tuple(
        Column(
            c.title(options.interval),
            _summary_kind(c),
            c.unit,
            key=c.key in ROW_KEYS,
            label=c.stacked,
        )
        for c in shown
    )
    rows = tuple(tuple(c.text(row, options.interval) for c in shown) for row in report.stages)
    notes = [CAPTION, LOW_SAMPLE_NOTE, method_note(report.percentiles)]
    return [Section("summary", SUMMARY_TITLE, cols, rows, "\n".join(n for n in notes if n))]


def _stacked(header: str) -> str:
    # "p50 95% CI" on two lines: "p50\n95% CI".
    head, _, tail = header.partition(" ")
    return f"{head}\n{tail}" if tail else head


def _kind(name: str) -> Kind:
    return "text" if name in ("provider", "region", "metric") else "ms"


@section(order=40)
def percentiles(report: RunReport, options: SectionOptions) -> list[Section]:
    """Per row × latency metric with a sample: n, the percentiles, mean, standard
    deviation and the p50 and p99 intervals (an interval no row has is left out)."""
    lines = percentile_rows(report.stages)
    if not lines:
        return []
    cols = tuple(
        Column(
            name,
            "int" if name in ("n", "stage") else _kind(name),
            "" if name in ROW_KEYS or name in ("metric", "n") else "ms",
            key=name in (*ROW_KEYS, "metric"),
            label=_stacked(name),
            optional="CI" in name,
        )
        for name in PERCENTILE_HEADER
    )
    rows = tuple(tuple(None if c == MISSING else c for c in line) for line in lines)
    return [
        Section(
            "percentiles",
            PERCENTILES_TITLE,
            cols,
            rows,
            split_by="metric",
            split_title="{} latency (ms)",
        )
    ]
