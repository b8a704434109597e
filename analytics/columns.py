"""The report's summary columns: one registry that every renderer reads.

Each entry names the stage-row field it shows (``key``: a ``stage_summary`` column, or a
field the report adds to the row), its header and unit, its formatter (how the text
formats write the cell), the further raw fields the cell shows (an interval, the error
classes), and the column sets that include it:

- ``summary``: the summary table of markdown (analytics/markdown.py) and HTML
  (analytics/html_report.py), and the ``columns`` list of the JSON report;
- ``terminal``: the narrower table of ``tokenbench report`` (api/cli/console.py), where
  the intervals move to the percentile table and two cost columns go;
- ``csv``: :func:`analytics.csv_report.render_csv`, which writes each column's raw fields.

Adding a report column is one SQL expression in the views (sql/views/, or a macro in
sql/macros.sql), which puts it in ``stage_summary`` and the JSON rows, and one entry here,
which puts it in the tables and the CSV (docs/analytics.md, "Adding a report column").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from analytics.formatting import errors, money, number, percentile

__all__ = ["COLUMNS", "ColumnSet", "ReportColumn", "columns", "describe"]

ColumnSet = Literal["summary", "terminal", "csv"]
Row = dict[str, Any]
Formatter = Callable[[Row, str], str]

ALL: frozenset[ColumnSet] = frozenset({"summary", "terminal", "csv"})
WIDE: frozenset[ColumnSet] = frozenset({"summary", "csv"})  # not in the terminal
TERMINAL: frozenset[ColumnSet] = frozenset({"terminal"})
CSV: frozenset[ColumnSet] = frozenset({"csv"})


@dataclass(frozen=True, slots=True)
class ReportColumn:
    """One column of the report's per stage × provider × region table."""

    key: str
    header: str
    unit: str
    formatter: Formatter
    sets: frozenset[ColumnSet] = ALL
    numeric: bool = True
    extra: tuple[str, ...] = ()

    @property
    def fields(self) -> tuple[str, ...]:
        """The raw fields of the row this column shows, its key first."""
        return (self.key, *self.extra)

    def text(self, row: Row) -> str:
        """The cell as the text formats write it."""
        return self.formatter(row, self.key)


def text(row: Row, key: str) -> str:
    """The value as it is."""
    return str(row[key])


def decimals(digits: int) -> Formatter:
    """A number with thousands separators and ``digits`` decimals."""
    return lambda row, key: number(row[key], digits)


def latency(digits: int = 1, interval: bool = False) -> Formatter:
    """A percentile (``*`` when its sample cannot support it), with its interval if asked."""
    return lambda row, key: percentile(row, key, digits, ci=interval)


def usd(row: Row, key: str) -> str:
    """USD with precision that suits its size."""
    return money(row[key])


def error_count(row: Row, key: str) -> str:
    """The count of failed requests with their classes."""
    return errors(row)


def listed(row: Row, key: str) -> str:
    """The items of a list field, comma-separated."""
    return ", ".join(str(item) for item in row[key])


def interval(key: str) -> tuple[str, str]:
    """The fields of a percentile's 95 % bootstrap interval."""
    stem = key.removesuffix("_ms")
    return f"{stem}_ci_low_ms", f"{stem}_ci_high_ms"


COLUMNS: tuple[ReportColumn, ...] = (
    ReportColumn("provider", "provider", "", text, numeric=False),
    ReportColumn("stage", "stage", "", text),
    ReportColumn("region", "region", "", text, numeric=False),
    ReportColumn("concurrency", "conc", "", text),
    ReportColumn("requests", "requests", "", text),
    ReportColumn("errors", "errors", "", error_count, numeric=False, extra=("errors_by_class",)),
    ReportColumn("request_rate", "req/s", "req/s", decimals(2)),
    # Every request that ended, failed ones too (request_rate counts successes only).
    ReportColumn("attempted_request_rate", "attempted req/s", "req/s", decimals(2), CSV),
    ReportColumn(
        "ttft_p50_ms", "TTFT p50 [95% CI]", "ms", latency(interval=True), WIDE,
        extra=interval("ttft_p50_ms"),
    ),
    ReportColumn(
        "ttft_p99_ms", "TTFT p99 [95% CI]", "ms", latency(interval=True), WIDE,
        extra=interval("ttft_p99_ms"),
    ),
    ReportColumn("ttft_p50_ms", "TTFT p50", "ms", latency(), TERMINAL),
    ReportColumn("ttft_p99_ms", "TTFT p99", "ms", latency(), TERMINAL),
    ReportColumn("itl_p50_ms", "ITL p50", "ms", latency(2)),
    ReportColumn("itl_p99_ms", "ITL p99", "ms", latency(2)),
    ReportColumn("tpot_p50_ms", "TPOT p50", "ms", latency(2)),
    ReportColumn("e2e_p99_ms", "E2E p99", "ms", latency()),
    ReportColumn("decode_tok_s_p50", "tok/s/stream", "tok/s", decimals(1)),
    ReportColumn("output_tok_s", "agg out tok/s", "tok/s", decimals(1)),
    ReportColumn("goodput_rps", "goodput/s", "req/s", decimals(2)),
    ReportColumn("slo_attainment_pct", "SLO %", "%", decimals(1)),
    ReportColumn("cost_per_mtok_input", "$/1M in", "USD per 1M tokens", usd, WIDE),
    ReportColumn("cost_per_mtok_output", "$/1M out", "USD per 1M tokens", usd),
    ReportColumn("cost_per_1k_requests", "$/1k req", "USD per 1k requests", usd, WIDE),
    # The text formats mark these percentiles with ``*``; raw values need the list.
    ReportColumn("low_sample", "low sample", "", listed, CSV, numeric=False),
)  # fmt: skip


def columns(column_set: ColumnSet) -> tuple[ReportColumn, ...]:
    """The columns of one set, in table order."""
    return tuple(column for column in COLUMNS if column_set in column.sets)


def describe(column_set: ColumnSet = "summary") -> list[dict[str, Any]]:
    """The columns of a set as data (the JSON report's ``columns``)."""
    return [
        {"key": c.key, "header": c.header, "unit": c.unit, "fields": list(c.fields)}
        for c in columns(column_set)
    ]
