"""The markdown renderer: a loop over the sections."""

from __future__ import annotations

from analytics.render.markdown import render_markdown, section_lines
from analytics.sections.model import Column, Section
from tests.support.sample_report import report

COLUMNS = (Column("name", key=True), Column("n", "int"), Column("CI", "ms", optional=True))


def test_a_table_section_heading_lead_cells_by_kind_and_note() -> None:
    section = Section("s", "Title", COLUMNS, (("a|b", 1234, None),), note="why", lead="<what>")
    assert section_lines(section) == [
        "## Title", "", "&lt;what&gt;", "",
        "| name | n |\n|---|---:|\n| a\\|b | 1,234 |", "",
        "_why_", "",
    ]  # fmt: skip


def test_lines_are_a_list_under_a_title_or_paragraphs_without() -> None:
    assert section_lines(Section("c", "Capacity", lines=("one",))) == [
        "## Capacity",
        "",
        "- one",
        "",
    ]
    assert section_lines(Section("d", "", lines=("dataset x",))) == ["dataset x", ""]


def test_the_report_is_its_sections_in_order() -> None:
    markdown = render_markdown(report())
    assert markdown.startswith("# tokenbench run run-1 · sections · finished\n\n## Summary\n")
    assert markdown.index("## Summary") < markdown.index("## Latency percentiles")
