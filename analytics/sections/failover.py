"""Failover through a gateway (analytics/report/failover.py, docs/failover.md): per stage, per
upstream, and the upstreams' logs; none for a run without upstreams."""

from __future__ import annotations

from typing import TYPE_CHECKING

from analytics.report.failover import failover_sections
from analytics.sections.model import Column, Section, SectionOptions
from analytics.sections.registry import section

if TYPE_CHECKING:
    from analytics.report.build import RunReport


# The terminal's headers, on two lines.
LABELS = {
    "client err": "client\nerr",
    "fell back": "fell\nback",
    "TTFT p50 fell back": "TTFT p50\nfell back",
    "TTFT p99 fell back": "TTFT p99\nfell back",
    "TTFT p50 1st try": "TTFT p50\n1st try",
    "TTFT p99 1st try": "TTFT p99\n1st try",
    "failover mean": "failover\nmean",
    "1st tries": "1st\ntries",
    "error rate": "error\nrate",
}


@section(order=80)
def failover(report: RunReport, options: SectionOptions) -> list[Section]:
    """The failover tables that have rows."""
    out = []
    for part in failover_sections(report.failover, report.upstreams, report.upstream_logs):
        columns = tuple(
            Column(
                name, "float" if numeric else "text", key=i < part.keys, label=LABELS.get(name, "")
            )
            for i, (name, numeric) in enumerate(zip(part.header, part.numeric, strict=True))
        )
        key = part.title.lower().replace(" ", "-")
        out.append(Section(key, part.title, columns, tuple(map(tuple, part.rows)), part.note))
    return out
