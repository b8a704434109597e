"""Self-hosted providers against the roofline ceiling at the observed batch
(analytics/report/roofline_view.py, docs/roofline.md); none when no row has a ceiling."""

from __future__ import annotations

from typing import TYPE_CHECKING

from analytics.sections.model import WHERE, Column, Section, SectionOptions
from analytics.sections.registry import section

if TYPE_CHECKING:
    from analytics.report.build import RunReport

TITLE = "self-hosted vs roofline ceiling (docs/roofline.md)"
NOTE = (
    "ceiling at efficiency 1 for the observed batch (achieved concurrency, capped "
    "by memory) and mean resident KV; efficiency = measured per-stream decode ÷ ceiling"
)
COLUMNS = (
    *WHERE,
    Column("batch", "float"),
    Column("ceiling tok/s/stream", "float", "tok/s", label="ceiling\ntok/s/stream"),
    Column("measured", "float", "tok/s"),
    Column("efficiency", "percent", "%", digits=0),
    Column("ceiling agg tok/s", "float", "tok/s", digits=0, label="ceiling\nagg tok/s"),
    Column("measured agg", "float", "tok/s", digits=0, label="measured\nagg"),
    Column("bound"),
    Column("$/1M out", "usd", "USD per 1M tokens", label="$/1M\nout"),
)


@section(order=50)
def roofline(report: RunReport, options: SectionOptions) -> list[Section]:
    """One row per stage row with a roofline ceiling."""
    rows = tuple(
        (
            r["provider"], r["stage"], r["region"], r["roofline_batch"],
            r["roofline_per_stream_tok_s"], r.get("decode_tok_s_p50"), r.get("efficiency_pct"),
            r["roofline_aggregate_tok_s"], r.get("output_tok_s"), r["roofline_bound"] or None,
            r.get("cost_per_mtok_output"),
        )
        for r in report.stages
        if r.get("roofline_per_stream_tok_s") is not None
    )  # fmt: skip
    return [Section("roofline", TITLE, COLUMNS, rows, NOTE)] if rows else []
