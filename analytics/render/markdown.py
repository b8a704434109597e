"""The report as GitHub-flavoured markdown (for pull requests, issues, notebooks): a loop
over the report's sections (analytics/sections/)."""

from __future__ import annotations

from collections.abc import Sequence

from analytics.report.build import RunReport
from analytics.sections.model import Section
from analytics.sections.registry import build_sections


def _escape(text: str) -> str:
    # Cells hold text others wrote (names, servers' error messages): a viewer that renders
    # markdown must show ``<id>`` or a tag as text, not take it for HTML.
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|").replace("\n", " ")


def table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool]) -> str:
    """A markdown table; numeric columns right-aligned."""
    lines = [
        "| " + " | ".join(_escape(h) for h in header) + " |",
        "|" + "|".join("---:" if n else "---" for n in numeric) + "|",
    ]
    lines += ["| " + " | ".join(_escape(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def section_lines(section: Section) -> list[str]:
    """One section: its heading, lead, table (or lines as a list) and note."""
    out = [f"## {_escape(section.title)}", ""] if section.title else []
    if section.lead:
        out += [_escape(section.lead), ""]
    if section.is_table:
        shown = section.shown()
        header = [section.columns[i].name for i in shown]
        numeric = [section.columns[i].numeric for i in shown]
        out += [table(header, section.text_rows(shown), numeric), ""]
    elif section.title:
        out += [*(f"- {_escape(line)}" for line in section.lines), ""]
    else:
        # Untitled lines (the dataset, a warning): a paragraph each.
        style = "_{}_" if section.key == "answers-notes" else "{}"
        for line in section.lines:
            out += [style.format(_escape(line)), ""]
    for line in section.note.split("\n") if section.note else ():
        out += [f"_{_escape(line)}_", ""]
    return out


def render_markdown(report: RunReport) -> str:
    """The whole report as markdown."""
    out = [f"# tokenbench run {report.run_id} · {report.name} · {report.state}", ""]
    for section in build_sections(report):
        out += section_lines(section)
    return "\n".join(out)
