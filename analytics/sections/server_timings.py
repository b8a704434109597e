"""Where the first token's time goes (analytics/report/server_timings.py, docs/metrics.md
"Server timings"): per stage and provider, the TTFT split into server queue, server
prefill and network + client, from the server timings joined to the records."""

from __future__ import annotations

from typing import TYPE_CHECKING

from analytics.sections.model import Cell, Column, Section, SectionOptions
from analytics.sections.registry import section

if TYPE_CHECKING:
    from analytics.report.build import RunReport

UNKNOWN = "unknown"
COLUMNS = (
    Column("provider", key=True),
    Column("stage", "int", key=True),
    Column("requests", "int"),
    Column("joined", "percent", label="joined\n%"),
    Column("queue p50", "ms", "ms", label="queue\np50"),
    Column("queue p99", "ms", "ms", label="queue\np99"),
    Column("prefill p50", "ms", "ms", label="prefill\np50"),
    Column("prefill p99", "ms", "ms", label="prefill\np99"),
    Column("network+client p50", "ms", "ms", label="net+client\np50"),
    Column("network+client p99", "ms", "ms", label="net+client\np99"),
    Column("client TTFT p50", "ms", "ms", label="TTFT\np50"),
)
TITLE = "Where the first token's time goes"
NOTE = (
    "server queue and prefill as the server reported them (OTLP spans joined on the "
    "response id, or the response itself); network + client = client TTFT - server TTFT "
    "(durations only, no clock sync); over the requests joined; unknown: no server "
    'timing joined (docs/metrics.md, "Server timings"; docs/traces.md)'
)
_PARTS = ("queue", "prefill", "network_client")


@section(order=75)
def server_timings(report: RunReport, options: SectionOptions) -> list[Section]:
    """One row per stage and provider; all rows once any request of the run joined."""
    if not any(row["joined"] for row in report.server_timings):
        return []
    rows: list[tuple[Cell, ...]] = []
    for row in report.server_timings:
        figures: list[Cell] = []
        for part in _PARTS:
            for quantile in ("p50", "p99"):
                value = row[f"{part}_{quantile}_ms"]
                figures.append(UNKNOWN if value is None else float(value))
        rows.append(
            (
                str(row["provider"]),
                int(row["stage"]),
                int(row["requests"]),
                100.0 * float(row["joined_share"] or 0.0),
                *figures,
                None if row["client_ttft_p50_ms"] is None else float(row["client_ttft_p50_ms"]),
            )
        )
    return [Section("server-timings", TITLE, COLUMNS, tuple(rows), NOTE)]
