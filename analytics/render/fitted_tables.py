"""Terminal tables that fit a width and never cut a figure.

A table is row keys (the columns that name a row: provider, stage, region) and value
columns. When they do not fit the width together, the values are split over several
tables, each repeating the row keys: as few tables as the width allows, their widths as
even as it allows. A numeric column is always as wide as its widest cell, never wrapped,
folded or ellipsised; only text (a name, the error classes) wraps, and folds when a word
is wider than what is left. Columns are two spaces apart with a rule under the headers
(a header may be on several lines: ``"TTFT\\np50"``), so a table takes its cells'
widths plus two per column; text that wraps counts as at most TEXT_CAP wide and takes
what the width leaves.

If even the row keys and one value column cannot fit (a very narrow terminal), the table
is drawn as wide as its figures need and the terminal wraps its lines: a line longer than
the screen, never a cut number.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

__all__ = ["GAP", "TEXT_CAP", "Column", "fit", "print_tables", "split", "table_width"]

GAP = 2  # spaces between two columns
TEXT_CAP = 24  # a text value column (error classes) wraps at this width


@dataclass(frozen=True, slots=True)
class Column:
    """One column: its header (lines separated by ``\\n``) and its cells, as text."""

    header: str
    cells: Sequence[str]
    numeric: bool = True
    # Text that wraps (a value: error classes, a verdict) rather than a row key, which
    # stays whole.
    wraps: bool = False

    @property
    def width(self) -> int:
        """The width the layout counts: its widest cell or header line, at most
        :data:`TEXT_CAP` for text that wraps (which takes what is left, if more)."""
        lines = [*self.header.split("\n"), *(line for c in self.cells for line in c.split("\n"))]
        natural = max(cell_len(line) for line in lines)
        return min(natural, TEXT_CAP) if self.wraps and not self.numeric else natural


def table_width(columns: Sequence[Column]) -> int:
    """The width of a table of these columns, as :func:`fit` draws it."""
    return sum(column.width for column in columns) + GAP * (len(columns) - 1)


def _greedy(keys: Sequence[Column], values: Sequence[Column], limit: int) -> list[list[Column]]:
    groups: list[list[Column]] = []
    current: list[Column] = []
    for column in values:
        if current and table_width([*keys, *current, column]) > limit:
            groups.append(current)
            current = []
        current.append(column)
    if current:
        groups.append(current)
    return groups


def split(keys: Sequence[Column], values: Sequence[Column], width: int) -> list[list[Column]]:
    """The value columns in consecutive groups that each fit ``width`` beside the keys:
    the fewest groups (first fit), then the narrowest limit that still gives that few,
    which evens their widths out. A column too wide for any limit gets a group alone."""
    fewest = _greedy(keys, values, width)
    narrowest = max((table_width([*keys, column]) for column in values), default=0)
    for limit in range(min(narrowest, width), width):
        groups = _greedy(keys, values, limit)
        if len(groups) == len(fewest):
            return groups
    return fewest


def _table(title: str, columns: Sequence[Column]) -> Table:
    table = Table(
        title=title,
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
        padding=(0, 1),
    )
    for column in columns:
        if column.numeric:
            # Exactly as wide as its widest figure: rich never shrinks or wraps it.
            table.add_column(column.header, justify="right", no_wrap=True, min_width=column.width)
        elif column.wraps:
            # Rich narrows the widest wrapping column first, down to what is left.
            table.add_column(column.header, justify="left", overflow="fold")
        else:
            table.add_column(column.header, justify="left", no_wrap=True)
    for row in zip(*(column.cells for column in columns), strict=True):
        # Text, not markup: a provider named "[x]" or an error message prints as it is.
        table.add_row(*(Text(cell) for cell in row))
    return table


def fit(
    title: str,
    keys: Sequence[Column],
    values: Sequence[Column],
    width: int,
    caption: str = "",
) -> list[Table | Text]:
    """The table (or tables, numbered in their titles) of ``keys`` and ``values`` that
    fit ``width``; then the caption, as a paragraph that wraps at the console's width
    rather than a narrow table's."""
    groups = split(keys, values, width) or [[]]
    out: list[Table | Text] = []
    for number, group in enumerate(groups, start=1):
        name = title if len(groups) == 1 else f"{title} ({number}/{len(groups)})"
        out.append(_table(name, [*keys, *group]))
    if caption:
        out.append(Text(caption, style="table.caption"))
    return out


def print_tables(console: Console, tables: Sequence[Table | Text]) -> None:
    """Print tables (and captions); a table narrower than its figures need is drawn at
    the width they need (the terminal wraps the long lines), so no figure is cut."""
    for table in tables:
        if isinstance(table, Text):
            console.print(table)
            continue
        unbounded = console.options.update_width(sys.maxsize)
        needed = Measurement.get(console, unbounded, table).minimum
        if needed <= console.width:
            console.print(table)
            continue
        width = console.width
        console.width = needed
        try:
            console.print(table, crop=False)
        finally:
            console.width = width
