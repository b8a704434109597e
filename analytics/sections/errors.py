"""Why requests failed (analytics/report/top_errors.py): each group's most frequent error
messages, redacted, with how many failures had other messages."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from analytics.report.top_errors import ERRORS_NOTE, ERRORS_TITLE
from analytics.sections.model import WHERE, Cell, Column, Section, SectionOptions
from analytics.sections.registry import section

if TYPE_CHECKING:
    from analytics.report.build import RunReport

COLUMNS = (
    *WHERE,
    Column("failed", "int"),
    Column("class"),
    Column("message"),
)
OTHERS = "(other messages)"

Group = tuple[int, str, str]


@section(order=110)
def errors(report: RunReport, options: SectionOptions) -> list[Section]:
    """Per provider, stage and region: each message's failures of the group's failed
    requests (``24 of 30``), its error class and message; then the failures with other
    messages. The note gives the rate at which requests ended, failed ones too."""
    if not report.errors:
        return []
    stages = {(int(r["stage"]), str(r["provider"]), str(r["region"])): r for r in report.stages}
    by_group: dict[Group, list[dict[str, Any]]] = {}
    for e in report.errors:
        by_group.setdefault((e["stage"], e["provider"], e["region"]), []).append(e)
    rows: list[tuple[Cell, ...]] = []
    attempted = []
    for (stage, provider, region), entries in by_group.items():
        row = stages.get((stage, provider, region))
        failed = None if row is None else int(row.get("errors") or 0)
        of = "" if failed is None else f" of {failed:,}"
        rows += [
            (provider, stage, region, f"{e['count']:,}{of}", e["error_class"], e["message"])
            for e in entries
        ]
        rest = (failed or 0) - sum(int(e["count"]) for e in entries)
        if rest > 0:
            rows.append((provider, stage, region, f"{rest:,}{of}", "", OTHERS))
        if row is not None and row.get("attempted_request_rate") is not None:
            total = int(row.get("requests") or 0)
            attempted.append(
                f"{provider} s{stage} {region} {row['attempted_request_rate']:,.2f} "
                f"({failed:,} of {total:,} failed)"
            )
    note = ERRORS_NOTE
    if attempted:
        note += " Requests ended per second, failed ones too: " + "; ".join(attempted) + "."
    return [Section("errors", ERRORS_TITLE, COLUMNS, tuple(rows), note)]
