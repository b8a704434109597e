"""Server telemetry scraped from providers' ``metrics_url`` (analytics/telemetry/metrics.py,
docs/telemetry.md): per provider × region × stage that was scraped, the mean and max of
each figure, and what the server's own counters say about its prefix cache, speculative
decoding and energy (docs/metrics.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from analytics.sections.model import Cell, Column, Section, SectionOptions
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

SERVER_FIGURES_TITLE = "Server-observed prefix cache, speculative decoding and energy"
SERVER_FIGURES_NOTE = (
    "From the server's own metrics, per stage: prefix-cache hit rate = hit / queried prompt "
    "tokens (vLLM's counters; SGLang's gauge averaged); draft acceptance = accepted / "
    "draft tokens; mean accepted length = 1 + accepted tokens / drafts (the bonus token "
    "included); GPU power and J per output token over the stage's steady window (DCGM "
    "power integrated, or its energy counter), summed over GPUs. – where the server "
    "exposes no such metric (docs/metrics.md)."
)
SERVER_FIGURE_COLUMNS = (
    Column("provider", key=True),
    Column("region", key=True),
    Column("stage", "int", key=True),
    Column("server prefix-cache hit", "percent", optional=True, label="server\ncache hit"),
    Column("draft acceptance", "percent", optional=True, label="draft\naccepted"),
    Column("mean accepted length", "float", digits=2, optional=True, label="accepted\nlength"),
    Column("GPU power mean (W)", "float", unit="W", digits=0, optional=True, label="GPU W\nmean"),
    Column(
        "J per output token", "float", unit="J", digits=3, optional=True, label="J per\nout tok"
    ),
)


def _percent(value: Any) -> float | None:
    return None if value is None else 100.0 * float(value)


def _figure_row(row: dict[str, Any]) -> tuple[Cell, ...]:
    return (
        row["provider"],
        row["region"],
        int(row["stage"]),
        _percent(row.get("server_prefix_cache_hit_rate")),
        _percent(row.get("spec_acceptance_rate")),
        row.get("spec_mean_accepted_length"),
        row.get("mean_gpu_power_w"),
        row.get("joules_per_output_token"),
    )


@section(order=70)
def telemetry(report: RunReport, options: SectionOptions) -> list[Section]:
    """Mean and max of each scraped figure while the stage's requests were in flight, and
    the server-observed cache, speculation and energy figures of each stage."""
    rows = tuple(tuple(row) for row in telemetry_rows(report.server_metrics))
    if not rows:
        return []
    sections = [Section("server-metrics", TELEMETRY_TITLE, COLUMNS, rows, TELEMETRY_NOTE)]
    figures = tuple(_figure_row(row) for row in report.server_metrics.get("stages", []))
    if any(cell is not None for row in figures for cell in row[3:]):
        sections.append(
            Section(
                "server-figures",
                SERVER_FIGURES_TITLE,
                SERVER_FIGURE_COLUMNS,
                figures,
                SERVER_FIGURES_NOTE,
            )
        )
    return sections
