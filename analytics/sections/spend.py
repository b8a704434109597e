"""What the run spent on token-priced providers, beside its dry-run bound
(analytics/report/spend.py, docs/teams.md); none for a run without a priced provider."""

from __future__ import annotations

from typing import TYPE_CHECKING

from analytics.sections.model import Column, Section, SectionOptions
from analytics.sections.registry import section

if TYPE_CHECKING:
    from analytics.report.build import RunReport

COLUMNS = (
    Column("provider", key=True),
    Column("input tokens", "int"),
    Column("output tokens", "int"),
    Column("spent", "usd", "USD"),
    Column("dry-run bound", "usd", "USD", label="dry-run\nbound"),
)


@section(order=165)
def spend(report: RunReport, options: SectionOptions) -> list[Section]:
    """Per priced provider: tokens and USD spent (recorded usage × list price) and the
    upper bound computed when the run was submitted; a line when a budget stopped it."""
    data = report.spend
    if not data or not data.get("rows"):
        return []
    rows = tuple(
        (r["provider"], r["input_tokens"], r["output_tokens"], r["usd"], r["bound_usd"])
        for r in data["rows"]
    )
    note = (
        "spend: recorded usage × list price, as the spend ledger holds it; dry-run bound: "
        "the upper bound computed at submission (– when none was stored or the load had "
        "none); docs/teams.md"
    )
    if data.get("max_cost_usd") is not None:
        note += f"; run cap ${data['max_cost_usd']:,.4f} (budget.max_cost_usd)"
    out = [Section("spend", "Spend", COLUMNS, rows, note)]
    if data.get("stop_reason"):
        line = f"stopped by its budget: {data.get('stop_detail') or data['stop_reason']}"
        out.append(Section("spend-stopped", "", lines=(line,), warning=True))
    return out
