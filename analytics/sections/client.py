"""The load generator's own health (analytics/report/client_health.py, docs/load.md):
connections pre-warmed before the stage clock, stages the client itself bounded, and
shards that failed or ran more than once."""

from __future__ import annotations

from typing import TYPE_CHECKING

from analytics.sections.model import WHERE, Column, Section, SectionOptions
from analytics.sections.registry import section
from scenarios.wire.contract import ShardState

if TYPE_CHECKING:
    from analytics.report.build import RunReport

PREWARM = (
    *WHERE,
    Column("connections", "int"),
    Column("in (ms)", "ms", "ms", digits=0),
)


@section(order=170)
def client_health(report: RunReport, options: SectionOptions) -> list[Section]:
    """Connections opened before the stage clock, and the stages whose figures the client
    bounded (a warning each)."""
    out = []
    rows = tuple(
        (r["provider"], r["stage"], r["region"], h["prewarmed_connections"], h.get("prewarm_ms", 0))
        for r in report.stages
        if (h := r.get("client_health")) and h.get("prewarmed_connections")
    )
    if rows:
        title = "Connections opened before the stage clock"
        out.append(Section("prewarm", title, PREWARM, rows, "pre-warm (docs/load.md)"))
    bound = tuple(
        f"client-bound: {r['provider']} stage {r['stage']} {r['region']} "
        f"({', '.join(r['client_health']['client_bound_reasons'])}): "
        f"{r['client_health']['client_bound_note']} (docs/load.md)"
        for r in report.stages
        if r.get("client_bound")
    )
    if bound:
        out.append(Section("client-bound", "", lines=bound, warning=True))
    return out


@section(order=180)
def shards(report: RunReport, options: SectionOptions) -> list[Section]:
    """Shards that did not finish, and shards that ran more than once (a warning)."""
    lines = [
        f"shard {s['shard_id']}: {s['state']}: {s['message']}"
        for s in report.shards
        if s["state"] != ShardState.FINISHED
    ]
    lines += [
        f"shard {s['shard_id']} ran {s['attempts']} attempts; "
        f"attempt {s['accepted_attempt']} counted"
        for s in report.shards
        if (s["attempts"] or 0) > 1
    ]
    return [Section("shards", "", lines=tuple(lines), warning=True)] if lines else []
