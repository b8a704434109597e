"""Server telemetry scraped from providers' ``metrics_url`` (analytics/telemetry/metrics.py,
docs/telemetry.md): per provider × region × stage that was scraped."""

from __future__ import annotations

from typing import TYPE_CHECKING

from analytics.sections.model import Column, Section, SectionOptions
from analytics.sections.registry import section
from analytics.telemetry.metrics import (
    TELEMETRY_HEADER,
    TELEMETRY_NOTE,
    TELEMETRY_NUMERIC,
    TELEMETRY_TITLE,
    telemetry_rows,
)

if TYPE_CHECKING:
    from analytics.report.build import RunReport

COLUMNS = tuple(
    Column(name, "float" if numeric else "text", key=i < 3)
    for i, (name, numeric) in enumerate(zip(TELEMETRY_HEADER, TELEMETRY_NUMERIC, strict=True))
)


@section(order=70)
def telemetry(report: RunReport, options: SectionOptions) -> list[Section]:
    """Mean and max of each scraped figure while the stage's requests were in flight."""
    rows = tuple(tuple(row) for row in telemetry_rows(report.server_metrics))
    if not rows:
        return []
    return [Section("server-metrics", TELEMETRY_TITLE, COLUMNS, rows, TELEMETRY_NOTE)]
