"""How runs or providers compare (analytics/stats/compare.py): a comparison's ratios and
verdicts, and cost against p99 TTFT with the Pareto-optimal rows marked."""

from __future__ import annotations

from typing import TYPE_CHECKING

from analytics.report.formatting import number
from analytics.sections.model import Column, Section, SectionOptions
from analytics.sections.registry import section

if TYPE_CHECKING:
    from analytics.report.build import RunReport

COMPARISON = (
    Column("stage", "int", key=True),
    Column("region", key=True),
    Column("metric", key=True),
    Column("A (ms)", "ms", "ms"),
    Column("B (ms)", "ms", "ms"),
    Column("B/A", "ratio"),
    Column("95% CI", "ratio"),
    Column("verdict"),
)
NOTHING = "nothing in common to compare"


@section(order=90)
def comparison(report: RunReport, options: SectionOptions) -> list[Section]:
    """B against A per stage, region and metric: both figures, the ratio, its interval
    and the verdict (none without a comparison)."""
    c = report.comparison
    if not c:
        return []
    rows = tuple(
        (
            r["stage"], r["region"], r["metric"], r["a_ms"], r["b_ms"], r["ratio"],
            None if r["ci_low"] is None else f"{r['ci_low']:.2f}–{r['ci_high']:.2f}",
            r["verdict"],
        )
        for r in c["rows"]
    )  # fmt: skip
    title = f"Comparison: {c['b']} vs {c['a']}"
    out = [Section("comparison", title, COMPARISON, rows, "" if rows else NOTHING)]
    # Imported runs (docs/import.md): a figure the two runs define differently.
    definitions = tuple(dict.fromkeys(n for r in c["rows"] for n in r.get("definitions", ())))
    if definitions:
        tools = " and ".join(c.get("tools", ()))
        lead = f"Definitions that differ between the runs ({tools}):"
        out.append(Section("comparison-definitions", lead, lines=definitions, warning=True))
    return out


PARETO = (
    Column("provider", key=True),
    Column("stage", "int", key=True),
    Column("region", key=True),
    Column("$/1M out", "usd", "USD per 1M tokens"),
    Column("TTFT p99 (ms)", "ms", "ms", label="TTFT\np99"),
    Column("Pareto-optimal", label="Pareto"),
)


@section(order=100)
def pareto(report: RunReport, options: SectionOptions) -> list[Section]:
    """Cost per 1M output tokens against p99 TTFT (``*``: a low sample)."""
    rows = tuple(
        (
            p["provider"], p["stage"], p["region"], p["cost_per_mtok_output"],
            number(p["ttft_p99_ms"]) + ("*" if p["ttft_p99_low_sample"] else ""),
            "yes" if p["pareto"] else "",
        )
        for p in report.pareto
    )  # fmt: skip
    return [Section("pareto", "Cost vs p99 TTFT", PARETO, rows)] if rows else []
