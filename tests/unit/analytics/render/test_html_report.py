"""The HTML renderer: a loop over the sections, the charts and KPI cards beside them."""

from __future__ import annotations

from analytics.render.html_report import render_html, section_html
from analytics.sections.model import Column, Section
from tests.support.sample_report import report

COLUMNS = (Column("name", key=True), Column("n", "int"), Column("CI", "ms", optional=True))


def test_a_table_section_anchor_lead_cells_by_kind_and_note() -> None:
    section = Section("s", "Title", COLUMNS, (("<a>", 1234, None),), note="why\nand how")
    html = section_html(section, "s-2")
    assert html.startswith('<h2 id="s-2">Title</h2><div class="wide"><table>')
    assert "<th>name</th><th>n</th></tr>" in html and "CI" not in html
    assert '<td>&lt;a&gt;</td><td class="n">1,234</td>' in html
    assert html.endswith('<p class="note">why<br>and how</p>')


def test_lines_a_list_under_a_title_a_warning_without() -> None:
    assert section_html(Section("c", "Capacity", lines=("x",)), "c") == (
        '<h2 id="c">Capacity</h2><ul class="answer"><li>x</li></ul>'
    )
    assert section_html(Section("w", "", lines=("careful",), warning=True), "w") == (
        '<p class="warn">careful</p>'
    )


def test_the_charts_sit_before_the_percentiles() -> None:
    html = render_html(report())
    assert html.index('id="summary"') < html.index('id="charts"') < html.index('id="percentiles"')
