"""The report's summary columns: one registry that every renderer reads.

Each entry names the stage-row field it shows (``key``: a ``stage_summary`` column, or a
field the report adds to the row; unique, and what ``--columns`` names), its header and
unit, its formatter (how the text formats write the cell), the further raw fields the
cell shows (an interval, the error classes), and the column sets that include it:

- ``summary``: the summary section (analytics/sections/summary.py) of markdown and HTML,
  and the ``columns`` list of the JSON report, where a percentile's cell carries its
  95 % interval;
- ``compact``: the default summary of the terminal (analytics/render/terminal_report.py), which
  reads at 80 columns;
- ``wide``: every column a text format can show (``--wide``; ``--columns`` picks from it);
- ``csv``: :func:`analytics.render.csv_report.render_csv`, which writes each column's raw fields.

Adding a report column is one SQL expression in the views (sql/views/, or a macro in
sql/macros.sql), which puts it in ``stage_summary`` and the JSON rows, and one entry here,
which puts it in the tables and the CSV (docs/analytics.md, "Adding a report column").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from analytics.report.formatting import errors, money, number, percentile
from scenarios.errors import BadInput

__all__ = [
    "COLUMNS",
    "ROW_KEYS",
    "ColumnSet",
    "ReportColumn",
    "UnknownColumnError",
    "columns",
    "describe",
    "select",
]

ColumnSet = Literal["summary", "compact", "wide", "csv"]
Row = dict[str, Any]
Formatter = Callable[[Row, str], str]

COMPACT: frozenset[ColumnSet] = frozenset({"summary", "compact", "wide", "csv"})
SUMMARY: frozenset[ColumnSet] = frozenset({"summary", "wide", "csv"})  # not compact
WIDE: frozenset[ColumnSet] = frozenset({"wide", "csv"})  # --wide and CSV only
CSV: frozenset[ColumnSet] = frozenset({"csv"})

# The fields that name a row: every terminal table starts with them (a table split to
# fit the width repeats them), whatever ``--columns`` asks for.
ROW_KEYS = ("provider", "stage", "region")


@dataclass(frozen=True, slots=True)
class ReportColumn:
    """One column of the report's per stage × provider × region table."""

    key: str
    header: str
    unit: str
    formatter: Formatter
    sets: frozenset[ColumnSet] = COMPACT
    numeric: bool = True
    extra: tuple[str, ...] = ()
    # The cell with its 95 % interval (markdown, HTML), when the column has one.
    with_interval: Formatter | None = None
    # The terminal's header, on lines; by default the header broken at its last space.
    label: str = ""

    @property
    def fields(self) -> tuple[str, ...]:
        """The raw fields of the row this column shows, its key first."""
        return (self.key, *self.extra)

    def text(self, row: Row, interval: bool = False) -> str:
        """The cell as the text formats write it (with its interval if asked and known)."""
        if interval and self.with_interval is not None:
            return self.with_interval(row, self.key)
        return self.formatter(row, self.key)

    def title(self, interval: bool = False) -> str:
        """The header (saying ``[95% CI]`` when the cells carry the interval)."""
        return f"{self.header} [95% CI]" if interval and self.with_interval else self.header

    @property
    def stacked(self) -> str:
        """The terminal's header: narrow, on two lines when it has words."""
        if self.label:
            return self.label
        head, _, tail = self.header.rpartition(" ")
        return f"{head}\n{tail}" if head else tail


def text(row: Row, key: str) -> str:
    """The value as it is."""
    return str(row[key])


# A stage's early end beside its number (analytics/report/answers.py, docs/answers.md).
STAGE_MARKS = {
    "saturated": "sat",
    "stopped_early": "early",
    "saturated (marked)": "sat?",
    "stopped_early (marked)": "early?",
}


def stage_text(row: Row, key: str) -> str:
    """The stage number, marked ``sat`` or ``early`` when it ended early."""
    mark = STAGE_MARKS.get(row.get("stage_outcome") or "")
    return f"{row[key]} {mark}" if mark else str(row[key])


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
    ReportColumn("stage", "stage", "", stage_text, extra=("stage_role", "stage_outcome")),
    ReportColumn("region", "region", "", text, numeric=False),
    ReportColumn("concurrency", "conc", "", text),
    ReportColumn("requests", "requests", "", text, label="n"),
    ReportColumn("errors", "errors", "", error_count, numeric=False, extra=("errors_by_class",)),
    # Open loop: the arrivals per second asked for (request_rate is what was served).
    ReportColumn("offered_rps", "offered req/s", "req/s", decimals(2), WIDE),
    ReportColumn("request_rate", "req/s", "req/s", decimals(2), SUMMARY),
    # Every request that ended, failed ones too (request_rate counts successes only).
    ReportColumn("attempted_request_rate", "attempted req/s", "req/s", decimals(2), CSV),
    ReportColumn(
        "ttft_p50_ms", "TTFT p50", "ms", latency(), extra=interval("ttft_p50_ms"),
        with_interval=latency(interval=True),
    ),
    ReportColumn(
        "ttft_p99_ms", "TTFT p99", "ms", latency(), extra=interval("ttft_p99_ms"),
        with_interval=latency(interval=True),
    ),
    ReportColumn("ttft_mean_ms", "TTFT mean", "ms", decimals(1), WIDE),
    ReportColumn("ttft_std_ms", "TTFT std", "ms", decimals(1), WIDE),
    ReportColumn("itl_p50_ms", "ITL p50", "ms", latency(2)),
    ReportColumn("itl_p99_ms", "ITL p99", "ms", latency(2), SUMMARY),
    ReportColumn("itl_mean_ms", "ITL mean", "ms", decimals(2), WIDE),
    ReportColumn("itl_std_ms", "ITL std", "ms", decimals(2), WIDE),
    ReportColumn("tpot_p50_ms", "TPOT p50", "ms", latency(2), SUMMARY),
    ReportColumn("tpot_mean_ms", "TPOT mean", "ms", decimals(2), WIDE),
    ReportColumn("tpot_std_ms", "TPOT std", "ms", decimals(2), WIDE),
    ReportColumn("e2e_p99_ms", "E2E p99", "ms", latency(), SUMMARY),
    ReportColumn("e2e_mean_ms", "E2E mean", "ms", decimals(1), WIDE),
    ReportColumn("e2e_std_ms", "E2E std", "ms", decimals(1), WIDE),
    ReportColumn("decode_tok_s_p50", "tok/s/stream", "tok/s", decimals(1), SUMMARY,
                 label="tok/s/\nstream"),
    ReportColumn("output_tok_s", "agg out tok/s", "tok/s", decimals(1), label="out\ntok/s"),
    ReportColumn("goodput_rps", "goodput/s", "req/s", decimals(2), SUMMARY),
    ReportColumn("slo_attainment_pct", "SLO %", "%", decimals(1), SUMMARY),
    ReportColumn("cost_per_mtok_input", "$/1M in", "USD per 1M tokens", usd, SUMMARY),
    ReportColumn("cost_per_mtok_output", "$/1M out", "USD per 1M tokens", usd),
    ReportColumn("cost_per_1k_requests", "$/1k req", "USD per 1k requests", usd, SUMMARY),
    # The text formats mark these percentiles with ``*``; raw values need the list.
    ReportColumn("low_sample", "low sample", "", listed, CSV, numeric=False),
)  # fmt: skip


def columns(column_set: ColumnSet) -> tuple[ReportColumn, ...]:
    """The columns of one set, in table order."""
    return tuple(column for column in COLUMNS if column_set in column.sets)


def describe(column_set: ColumnSet = "summary") -> list[dict[str, Any]]:
    """The columns of a set as data (the JSON report's ``columns``: headers as the
    summary table writes them, a percentile's with its interval)."""
    interval = column_set == "summary"
    return [
        {"key": c.key, "header": c.title(interval), "unit": c.unit, "fields": list(c.fields)}
        for c in columns(column_set)
    ]


class UnknownColumnError(BadInput, LookupError):
    """``--columns`` named a key the registry does not have; the message lists them all."""

    def __init__(self, unknown: list[str]) -> None:
        self.unknown = unknown
        valid = ", ".join(c.key for c in columns("wide"))
        names = ", ".join(unknown)
        super().__init__(f"unknown column(s) {names}; --columns takes these keys: {valid}")


def select(keys: str | None = None, wide: bool = False) -> tuple[ReportColumn, ...]:
    """The terminal table's columns: the compact set; every column (``wide``); or the
    comma-separated ``keys`` in their order, after the row keys (provider, stage, region)
    that every table starts with. Raises :class:`UnknownColumnError`."""
    if keys is None:
        return columns("wide" if wide else "compact")
    by_key = {c.key: c for c in columns("wide")}
    asked = [key.strip() for key in keys.split(",") if key.strip()]
    unknown = [key for key in asked if key not in by_key]
    if unknown or not asked:
        raise UnknownColumnError(unknown or [repr(keys)])
    chosen = dict.fromkeys([*ROW_KEYS, *asked])
    return tuple(by_key[key] for key in chosen)
