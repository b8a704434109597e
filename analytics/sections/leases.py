"""Endpoints measured ``shared: true`` and the runs that overlapped them
(analytics/report/overlaps.py, docs/teams.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from analytics.sections.model import Cell, Column, Section, SectionOptions
from analytics.sections.registry import section

if TYPE_CHECKING:
    from analytics.report.build import RunReport

COLUMNS = (
    Column("provider", key=True),
    Column("overlapping run", key=True),
    Column("its provider"),
    Column("overlap s", "float"),
    Column("target"),
)
NOTE = (
    "These providers were measured shared: true (no endpoint lease), and these other runs "
    "measured the same endpoint (URL, model, key variable) at the same time; their load is "
    "in this run's figures. Without shared, a run waits in the queue until its endpoints "
    "are free (docs/teams.md, Endpoint leases and queued runs)."
)


@section(order=45)
def shared_endpoints(report: RunReport, options: SectionOptions) -> list[Section]:
    """One row per provider measured shared and other run that overlapped it in time."""
    if not report.shared_overlaps:
        return []
    rows: tuple[tuple[Cell, ...], ...] = tuple(
        (r["provider"], r["run_id"], r["other_provider"], r["overlap_s"], r["target"])
        for r in report.shared_overlaps
    )
    title = "Shared endpoints: overlapping runs"
    return [Section("shared_endpoints", title, COLUMNS, rows, NOTE, warning=True)]
