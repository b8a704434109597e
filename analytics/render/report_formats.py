"""The report's document formats: one table of name → media type and renderer.

``GET /v1/runs/{id}/report`` serves every format of this table, chosen by ``?format=``
or the ``Accept`` header, so a format added here (one line: a name, its media type and a
function of the report) is served by the REST API with nothing else to change. The
terminal table is not a document format: it is drawn by the command line.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import json
from collections.abc import Callable
from typing import Any

from analytics.render.csv_report import render_csv
from analytics.render.markdown import render_markdown
from analytics.report.build import RunReport
from analytics.sections.registry import build_sections


@dataclasses.dataclass(frozen=True, slots=True)
class ReportFormat:
    """A way to write a report as a document."""

    name: str
    media_type: str
    render: Callable[[RunReport], str]


def json_default(value: Any) -> Any:
    """JSON for the values DuckDB hands back beyond JSON's own (as FastAPI encodes them)."""
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    return str(value)


def render_json(report: RunReport) -> str:
    """The report as one JSON document: ``RunReport.to_dict``, and its ``sections``, the
    tables the text formats draw, as data (analytics/sections/)."""
    document = {
        **report.to_dict(),
        "sections": [section.to_dict() for section in build_sections(report)],
    }
    return json.dumps(document, default=json_default, ensure_ascii=False)


def _render_html(report: RunReport) -> str:
    # Plotly loads in ~0.1 s: only a process that draws an HTML report pays for it.
    from analytics.render.html_report import render_html  # noqa: PLC0415

    return render_html(report)


# The first is the default: what a client gets when it names no format.
REPORT_FORMATS: dict[str, ReportFormat] = {
    fmt.name: fmt
    for fmt in (
        ReportFormat("json", "application/json", render_json),
        ReportFormat("markdown", "text/markdown", render_markdown),
        ReportFormat("html", "text/html", _render_html),
        ReportFormat("csv", "text/csv", render_csv),
    )
}
