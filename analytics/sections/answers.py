"""What a sweep or capacity search found (analytics/report/answers.py, docs/answers.md): the
capacity sentences that head the report, the sweep's curve per provider and region with
its knee, and the stages ended early."""

from __future__ import annotations

from typing import TYPE_CHECKING

from analytics.sections.answers_text import (
    CAPACITY_TITLE,
    ENDED_TITLE,
    SWEEP_TITLE,
    TextTable,
    capacity_lines,
    ended_table,
    sweep_tables,
)
from analytics.sections.model import Column, Kind, Section, SectionOptions
from analytics.sections.registry import section

if TYPE_CHECKING:
    from analytics.report.build import RunReport


@section(order=10)
def capacity(report: RunReport, options: SectionOptions) -> list[Section]:
    """One sentence per provider and region of a capacity search."""
    lines = capacity_lines(report.answers)
    return [Section("capacity", CAPACITY_TITLE, lines=tuple(lines))] if lines else []


def _table(key: str, title: str, table: TextTable) -> Section:
    kinds: list[Kind] = ["float" if numeric else "text" for numeric in table.numeric]
    columns = tuple(Column(name, kinds[i], key=i == 0) for i, name in enumerate(table.header))
    rows = tuple(tuple(row) for row in table.rows)
    return Section(key, title, columns, rows, lead=table.caption)


@section(order=30)
def sweep(report: RunReport, options: SectionOptions) -> list[Section]:
    """The sweep's points per provider and region (knee marked), the stages ended early,
    and the answers' notes."""
    out = [_table("sweep", SWEEP_TITLE, table) for table in sweep_tables(report.answers)]
    ended = ended_table(report.answers)
    if ended is not None:
        out.append(_table("ended", ENDED_TITLE, ended))
    if note := report.answers.get("notes"):
        out.append(Section("answers-notes", "", lines=(str(note),)))
    return out
