"""One registry of report columns, read by the terminal table, markdown, HTML, JSON and CSV."""

from __future__ import annotations

import re

import pytest
from rich.console import Console

from analytics import columns as registry
from analytics.columns import COLUMNS, ReportColumn, columns, describe, text
from analytics.csv_report import render_csv
from analytics.db import connect
from analytics.html_report import render_html
from analytics.markdown import render_markdown
from analytics.report import RunReport, build_report
from analytics.stored import ExactLimits
from api.cli.console import report_table
from tests.support.builders import MS, S, failed_result, ok_result
from tests.support.builders import REPORT_SCENARIO as SCENARIO
from tests.support.builders import store_run as store
from workers.client.errors import ErrorClass


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> list[RunReport]:
    """One run with three providers and failures, reported exactly and from stored sums."""
    con = connect(tmp_path_factory.mktemp("columns") / "c.duckdb")
    shards = {
        (provider, 0): [ok_result(10 * S + i * 100 * MS, 90.0 + i, [5.0] * 9) for i in range(30)]
        + [failed_result(10 * S, ErrorClass.HTTP_429)]
        for provider in ("api", "gpu", "own")
    }
    store(con, "run", SCENARIO, shards)
    exact = build_report(con, "run")
    stored = build_report(con, "run", exact_limits=ExactLimits(ok_requests=0, itl_gaps=0))
    con.close()
    return [exact, stored]


def terminal_headers(report: RunReport) -> list[str]:
    return [str(column.header) for column in report_table(report).columns]


def test_every_column_shows_fields_the_report_rows_have(reports: list[RunReport]) -> None:
    for report in reports:
        for row in report.stages:
            missing = {f for c in COLUMNS for f in c.fields if f not in row}
            assert not missing, missing


def test_each_set_has_distinct_headers_and_the_terminal_no_intervals() -> None:
    for column_set in ("summary", "terminal", "csv"):
        headers = [c.header for c in columns(column_set)]
        assert len(headers) == len(set(headers)), column_set
    assert not [c for c in columns("terminal") if "[95% CI]" in c.header]
    assert {c.key for c in columns("summary")} <= {c.key for c in columns("csv")}


def test_every_renderer_reads_the_registry(reports: list[RunReport]) -> None:
    report = reports[0]
    summary = [c.header for c in columns("summary")]
    markdown = render_markdown(report).splitlines()[2]
    assert markdown == "| " + " | ".join(summary) + " |"
    html_head = re.search(r"<thead><tr>(.*?)</tr></thead>", render_html(report))
    assert html_head is not None
    assert re.findall(r"<th>(.*?)</th>", html_head[1]) == [h.replace("&", "&amp;") for h in summary]
    assert terminal_headers(report) == [c.header for c in columns("terminal")]
    assert report.to_dict()["columns"] == describe("summary")
    csv_header = render_csv(report).splitlines()[0].split(",")
    assert csv_header == [f for c in columns("csv") for f in c.fields]


def test_a_new_entry_reaches_every_format(
    reports: list[RunReport], monkeypatch: pytest.MonkeyPatch
) -> None:
    added = ReportColumn("ok", "ok requests", "", text)
    monkeypatch.setattr(registry, "COLUMNS", (*COLUMNS, added))
    report = reports[0]
    assert render_markdown(report).splitlines()[2].endswith("| ok requests |")
    assert "<th>ok requests</th>" in render_html(report)
    assert terminal_headers(report)[-1] == "ok requests"
    assert describe("summary")[-1]["key"] == "ok"
    assert render_csv(report).splitlines()[0].endswith(",ok")
    page = Console(width=250, record=True)
    page.print(report_table(report))
    assert re.search(r"│\s+30 │\n", page.export_text())  # the value, right-aligned
