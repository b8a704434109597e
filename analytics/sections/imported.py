"""An imported run (docs/import.md): where it came from, how its tool defines what it
measured, and the figures the tool printed beside the ones computed from its rows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from analytics.sections.model import Column, Section, SectionOptions
from analytics.sections.registry import section

if TYPE_CHECKING:
    from analytics.report.build import RunReport

FIGURES = (
    Column("stage", "int", key=True),
    Column("provider", key=True),
    Column("figure", key=True),
    Column("stat", key=True),
    Column("tool's value", "float", label="tool"),
    Column("from rows", "float", label="from\nrows"),
    Column("unit"),
)


def _provenance(imported: dict[str, object]) -> tuple[str, ...]:
    version = imported["tool_version"] or "version not in the file"
    rows = "rows per request" if imported["per_request"] else "the tool's summaries only"
    files = imported["files"]
    names = ", ".join(
        f"{f['name']} (sha256 {str(f['sha256'])[:12]})"
        for f in files  # type: ignore[attr-defined]
    )
    lines = [
        f"Imported from {imported['tool']} ({version}), {imported['format']}: {rows}.",
        f"Files: {names}.",
        f"Imported {imported['imported_at']} by {imported['imported_by']}.",
    ]
    if imported["target"]:
        lines.append(f"Endpoint as the file names it: {imported['target']}.")
    return tuple(lines)


@section(order=15)
def imported(report: RunReport, options: SectionOptions) -> list[Section]:
    """Provenance and definition notes (lines), then the tool's own figures."""
    data = report.imported
    if data is None:
        return []
    notes = tuple(f"{n['figure']}: {n['note']}" for n in data["notes"]) or (
        "no figure is defined differently from tokenbench's",
    )
    out = [
        Section("imported", f"Imported run ({data['tool']})", lines=_provenance(data)),
        Section("imported-definitions", "How the tool defines its figures", lines=notes),
    ]
    rows = tuple(
        (f["stage"], f["provider"], f["figure"], f["stat"], f["tool_value"], f["from_rows"],
         f["unit"])
        for f in data["figures"]
    )  # fmt: skip
    if rows:
        note = (
            "from rows: the same figure computed by tokenbench from the imported rows"
            if data["per_request"]
            else "the file has no rows per request: these figures are the tool's alone"
        )
        out.append(Section("imported-figures", "As the tool printed it", FIGURES, rows, note))
    return out
