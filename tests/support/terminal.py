"""The terminal's tables of some of a report's sections (analytics/render/terminal_report.py)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text

from analytics.render.terminal_report import heading, section_tables
from analytics.report.build import RunReport
from analytics.report.columns import ReportColumn, select
from analytics.sections.model import SectionOptions
from analytics.sections.registry import build_sections


def terminal_tables(
    report: RunReport, width: int, *keys: str, shown: Sequence[ReportColumn] | None = None
) -> list[Table | Text]:
    """The tables (and notes) the terminal draws for the sections whose key is one of
    ``keys``, in report order, fitted to ``width``."""
    options = SectionOptions(summary=select() if shown is None else shown, interval=False)
    return [
        table
        for section in build_sections(report, options)
        if section.key in keys
        for table in section_tables(
            section, width, heading(report) if section.key == "summary" else ""
        )
    ]
