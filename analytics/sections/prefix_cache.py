"""The prefix cache per stage (docs/metrics.md, "Prefix cache"): the hit rate the client
observed from usage, beside the server's own from telemetry where the run has it, the
target and planned rates of a workload with ``prefix_cache``, and the cache resets."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from analytics.report.prefix_cache import SERVER_FIELD
from analytics.sections.model import WHERE, Column, Section, SectionOptions
from analytics.sections.registry import section

if TYPE_CHECKING:
    from analytics.report.build import RunReport

PREFIX_CACHE = (
    *WHERE,
    Column("reported", "int", label="cache\nreported"),
    Column("cached tokens", "tokens", "tokens", digits=0, label="cached\ntokens"),
    Column("hit rate", "percent", "%", label="hit rate\n(client)"),
    Column("server hit rate", "percent", "%", optional=True, label="hit rate\n(server)"),
    Column("target", "percent", "%", optional=True),
    Column("planned", "percent", "%", optional=True),
    Column("achieved - target", "float", "pp", optional=True, label="achieved\n- target"),
    Column("cache reset", optional=True, label="cache\nreset"),
)


def _gap(row: Mapping[str, Any]) -> float | None:
    hit, target = row.get("cache_hit_pct"), row.get("cache_target_pct")
    return None if hit is None or target is None else float(hit) - float(target)


@section(order=155)
def prefix_cache(report: RunReport, options: SectionOptions) -> list[Section]:
    """Per stage row, when a request reported cached tokens, the workload set a target
    hit rate or a cache reset was sent: requests whose usage said how much was cached,
    those tokens, the client-observed hit rate (the server's beside it when telemetry
    has it), the target and planned rates and the achieved rate's distance from the
    target (percentage points), and the outcome of the stage's cache resets."""
    if not any("cache_reported" in r for r in report.stages):
        return []
    rows = tuple(
        (
            r["provider"],
            r["stage"],
            r["region"],
            r.get("cache_reported"),
            r.get("cached_tokens"),
            r.get("cache_hit_pct"),
            r.get(SERVER_FIELD),
            r.get("cache_target_pct"),
            r.get("cache_planned_pct"),
            _gap(r),
            r.get("cache_reset"),
        )
        for r in report.stages
    )
    note = (
        "hit rate: cached over prompt tokens of the successful requests whose usage "
        "reported cached tokens (unknown when none did); planned: the tokens the workload "
        "built to repeat (the stage's first request seeds them); servers cache whole "
        "blocks, so achieved sits a little under the target (docs/metrics.md)"
    )
    return [Section("prefix-cache", "Prefix cache", PREFIX_CACHE, rows, note)]
