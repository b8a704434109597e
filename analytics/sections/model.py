"""The report-section model: a section is a titled table (or a few lines) as data.

Every table of a report is produced once, by one function of a section module
(analytics/sections/), as a :class:`Section`: its columns (a name, a kind that says how
a value is written and aligned, a unit), its rows of cell values, and a note. The
renderers (the terminal, markdown, HTML, the JSON report's ``sections``) loop over the
ordered list and write each cell by its column's kind, so they cannot disagree on what a
section shows. A section that reads as sentences (the capacity answers, a warning) has
``lines`` instead of columns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from analytics.report.formatting import money

if TYPE_CHECKING:
    from analytics.report.build import RunReport
    from analytics.report.columns import ReportColumn

__all__ = [
    "MISSING",
    "WHERE",
    "Cell",
    "Column",
    "Kind",
    "Section",
    "SectionBuilder",
    "SectionOptions",
]

# How a column's values are written: ``text`` as it is (left-aligned); the others are
# figures (right-aligned): ``int`` with thousands separators; ``float``, ``ms`` and
# ``tokens`` with ``digits`` decimals; ``percent`` as ``12.5 %``; ``change`` signed
# (``+1.2 %``); ``usd`` with precision that suits its size; ``ratio`` as ``1.25×``.
Kind = Literal["text", "int", "float", "ms", "tokens", "percent", "change", "usd", "ratio"]
# A cell: a value the column's kind writes, or text already written (a composite figure
# such as ``24 of 30`` or ``101.4*``), shown as it is; None is missing (``–``).
Cell = str | int | float | None
MISSING = "–"


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a section."""

    name: str
    kind: Kind = "text"
    unit: str = ""
    digits: int = 1
    # Names the row (provider, stage, region, ...): a table split to fit a width repeats it.
    key: bool = False
    # The terminal's header, on lines (``"TTFT\\np50"``); by default the name.
    label: str = ""
    # Left out of a table in which no row has a value.
    optional: bool = False

    @property
    def numeric(self) -> bool:
        """Whether the column holds figures (right-aligned)."""
        return self.kind != "text"

    @property
    def header(self) -> str:
        """The terminal's header (lines separated by ``\\n``)."""
        return self.label or self.name

    def format(self, value: Cell) -> str:
        """The cell as text: by the column's kind; text as it is; ``–`` when missing."""
        if value is None:
            return MISSING
        if isinstance(value, str):
            return value
        return _FORMATS[self.kind](value, self.digits)

    def describe(self) -> dict[str, Any]:
        """The column as data (the JSON report's ``sections``)."""
        return {"name": self.name, "kind": self.kind, "unit": self.unit}


def _float(value: float, digits: int) -> str:
    return f"{value:,.{digits}f}"


_FORMATS: dict[str, Callable[[float, int], str]] = {
    "text": lambda v, d: str(v),
    "int": lambda v, d: f"{int(v):,}",
    "float": _float,
    "ms": _float,
    "tokens": _float,
    "percent": lambda v, d: f"{v:.{d}f} %",
    "change": lambda v, d: f"{v:+.{d}f} %",
    "usd": lambda v, d: money(v),
    "ratio": lambda v, d: f"{v:.2f}×",
}


@dataclass(frozen=True, slots=True)
class Section:
    """One section of a report: a titled table, or titled lines."""

    # Stable id: the HTML anchor, the JSON ``key``.
    key: str
    title: str
    columns: tuple[Column, ...] = ()
    rows: tuple[tuple[Cell, ...], ...] = ()
    # Text after the table (what its figures mean, where the docs are).
    note: str = ""
    # Text before the table (a sweep's answer); the terminal uses it as the table's title.
    lead: str = ""
    # A section of sentences, not a table: one item a line.
    lines: tuple[str, ...] = ()
    # A warning (the terminal prints it in yellow).
    warning: bool = False
    # The terminal draws one table per value of this column (named by ``split_title``).
    split_by: str = ""
    split_title: str = "{}"

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(
                    f"section {self.key}: a row of {len(row)} cells, not {len(self.columns)}"
                )

    @property
    def is_table(self) -> bool:
        """Whether the section is a table (else lines)."""
        return bool(self.columns)

    def shown(self) -> list[int]:
        """The indices of the columns a table shows: an optional column only when some
        row has a value in it."""
        return [
            i
            for i, column in enumerate(self.columns)
            if not column.optional
            or any(row[i] is not None and row[i] != MISSING for row in self.rows)
        ]

    def text_rows(self, indices: Sequence[int] | None = None) -> list[list[str]]:
        """The rows as text, each cell written by its column's kind."""
        chosen = range(len(self.columns)) if indices is None else indices
        return [[self.columns[i].format(row[i]) for i in chosen] for row in self.rows]

    def to_dict(self) -> dict[str, Any]:
        """The section as data (JSON-ready: cells as values, not text)."""
        out: dict[str, Any] = {"key": self.key, "title": self.title}
        if self.is_table:
            out["columns"] = [column.describe() for column in self.columns]
            out["rows"] = [list(row) for row in self.rows]
        else:
            out["lines"] = list(self.lines)
        if self.lead:
            out["lead"] = self.lead
        if self.note:
            out["note"] = self.note
        return out


@dataclass(frozen=True, slots=True)
class SectionOptions:
    """What a renderer asks of the sections it loops over."""

    # The summary table's columns (analytics/report/columns.py): the ``summary`` set by default.
    summary: Sequence[ReportColumn] | None = None
    # Percentile cells with their 95 % interval (markdown, HTML), not the terminal's.
    interval: bool = True


# The columns that name a stage row, first in most sections.
WHERE = (Column("provider", key=True), Column("stage", "int", key=True), Column("region", key=True))

# A section function: the report's sections of one kind, in order (none when the run has
# nothing to show in them).
SectionBuilder = Callable[["RunReport", SectionOptions], list[Section]]
