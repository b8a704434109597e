"""The report as terminal tables (rich), fitted to a width: a loop over the report's
sections (analytics/sections/), each table split to fit and never cutting a figure
(analytics/render/fitted_tables.py). The command line only prints what this returns."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text

from analytics.render.fitted_tables import Column, fit
from analytics.report.build import RunReport
from analytics.report.columns import ReportColumn, select
from analytics.sections.model import Section, SectionOptions
from analytics.sections.registry import build_sections

__all__ = ["heading", "section_tables", "terminal_report"]

Renderable = Table | Text


def heading(report: RunReport) -> str:
    """The report's title: the run, its scenario and state."""
    return f"tokenbench run {report.run_id} · {report.name} · {report.state}"


def _lines(section: Section) -> list[Renderable]:
    style = "yellow" if section.warning else ""
    if not section.title:
        return [Text(line, style=style) for line in section.lines]
    return [
        Text(section.title, style="bold"),
        *(Text(f"  {line}", style=style) for line in section.lines),
    ]


def _groups(section: Section) -> list[tuple[str, list[int]]]:
    """The row indices of each table the terminal draws: one per value of the
    ``split_by`` column, in order of appearance, or all rows."""
    names = [c.name for c in section.columns]
    if section.split_by not in names:
        return [(section.lead or section.title, list(range(len(section.rows))))]
    at = names.index(section.split_by)
    groups: dict[str, list[int]] = {}
    for i, row in enumerate(section.rows):
        groups.setdefault(section.columns[at].format(row[at]), []).append(i)
    return [(section.split_title.format(value), rows) for value, rows in groups.items()]


def section_tables(section: Section, width: int, title: str = "") -> list[Renderable]:
    """One section as tables that fit ``width`` (a split table repeats its row keys), its
    note after them; or its lines."""
    if not section.is_table:
        return _lines(section)
    out: list[Renderable] = []
    groups = _groups(section)
    for number, (name, indices) in enumerate(groups, start=1):
        rows = [section.rows[i] for i in indices]
        part = Section(section.key, section.title, section.columns, tuple(rows))
        shown = [i for i in part.shown() if section.columns[i].name != section.split_by]
        cells = part.text_rows(shown)
        columns = []
        for at, i in enumerate(shown):
            c = section.columns[i]
            text = [row[at] for row in cells]
            columns.append(
                (c.key, Column(c.header, text, numeric=c.numeric, wraps=not (c.numeric or c.key)))
            )
        out += fit(
            title or name,
            [column for key, column in columns if key],
            [column for key, column in columns if not key],
            width,
            caption=section.note if number == len(groups) else "",
        )
    return out


def terminal_report(
    report: RunReport, width: int, shown: Sequence[ReportColumn] | None = None
) -> list[Renderable]:
    """Every section of the report as terminal tables fitted to ``width``: the summary
    with the ``shown`` columns (default: the compact set that reads at 80 columns)."""
    options = SectionOptions(summary=select() if shown is None else shown, interval=False)
    out: list[Renderable] = []
    for section in build_sections(report, options):
        title = heading(report) if section.key == "summary" else ""
        out += section_tables(section, width, title)
    return out
