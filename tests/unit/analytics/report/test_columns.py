"""One registry of report columns, read by the terminal table, markdown, HTML, JSON and CSV."""

from __future__ import annotations

import re

import pytest
from rich.console import Console
from rich.table import Table

from analytics.render.csv_report import render_csv
from analytics.render.html_report import render_html
from analytics.render.markdown import render_markdown
from analytics.report import columns as registry
from analytics.report.build import RunReport, build_report
from analytics.report.columns import (
    COLUMNS,
    ROW_KEYS,
    ReportColumn,
    UnknownColumnError,
    columns,
    describe,
    select,
    text,
)
from analytics.report.stored import ExactLimits
from analytics.store.db import connect
from tests.support.builders import MS, S, failed_result, ok_result
from tests.support.builders import REPORT_SCENARIO as SCENARIO
from tests.support.builders import store_run as store
from tests.support.terminal import terminal_tables
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


def terminal_headers(report: RunReport, width: int = 250) -> list[str]:
    (table,) = [t for t in terminal_tables(report, width, "summary") if isinstance(t, Table)]
    return [str(column.header) for column in table.columns]


def test_every_column_shows_fields_the_report_rows_have(reports: list[RunReport]) -> None:
    for report in reports:
        for row in report.stages:
            missing = {f for c in COLUMNS for f in c.fields if f not in row}
            assert not missing, missing


def test_keys_are_unique_and_the_sets_nest() -> None:
    keys = [c.key for c in COLUMNS]
    assert len(keys) == len(set(keys))  # what --columns names
    for column_set in ("summary", "compact", "wide", "csv"):
        headers = [c.header for c in columns(column_set)]
        assert len(headers) == len(set(headers)), column_set
    compact, summary = {c.key for c in columns("compact")}, {c.key for c in columns("summary")}
    wide, csv = {c.key for c in columns("wide")}, {c.key for c in columns("csv")}
    assert compact <= summary <= wide <= csv
    assert [c.key for c in columns("compact")][:3] == list(ROW_KEYS)
    # The compact default of the terminal, as issue 13 lists it.
    assert [c.header for c in columns("compact")] == [
        "provider", "stage", "region", "conc", "requests", "errors", "TTFT p50", "TTFT p99",
        "ITL p50", "agg out tok/s", "$/1M out",
    ]  # fmt: skip
    # Mean and standard deviation of each latency metric, in --wide and the CSV.
    for metric in ("ttft", "itl", "tpot", "e2e"):
        assert {f"{metric}_mean_ms", f"{metric}_std_ms"} <= wide - summary


def test_the_terminal_header_is_stacked_and_the_summary_carries_intervals() -> None:
    by_key = {c.key: c for c in COLUMNS}
    assert by_key["ttft_p50_ms"].stacked == "TTFT\np50"
    assert by_key["requests"].stacked == "n"
    assert by_key["stage"].stacked == "stage"
    assert by_key["ttft_p50_ms"].title(interval=True) == "TTFT p50 [95% CI]"
    assert by_key["itl_p50_ms"].title(interval=True) == "ITL p50"  # ITL has no interval
    row = {"ttft_p50_ms": 100.04, "ttft_p50_ci_low_ms": 99.0, "ttft_p50_ci_high_ms": 101.0}
    assert by_key["ttft_p50_ms"].text(row) == "100.0"
    assert by_key["ttft_p50_ms"].text(row, interval=True) == "100.0 [99.0–101.0]"


def test_columns_are_chosen_by_key() -> None:
    assert select() == columns("compact")
    assert select(wide=True) == columns("wide")
    chosen = [c.key for c in select("itl_p99_ms, e2e_mean_ms,region")]
    assert chosen == ["provider", "stage", "region", "itl_p99_ms", "e2e_mean_ms"]
    with pytest.raises(UnknownColumnError) as caught:
        select("ttft_p50_ms,ttft_p42_ms")
    message = str(caught.value)
    assert "ttft_p42_ms" in message and "ttft_p50_ms" not in message.split(";", maxsplit=1)[0]
    assert all(c.key in message for c in columns("wide"))  # every valid key listed
    with pytest.raises(UnknownColumnError):
        select(" , ")
    with pytest.raises(UnknownColumnError):
        select("low_sample")  # raw CSV field: no text form


def test_every_renderer_reads_the_registry(reports: list[RunReport]) -> None:
    report = reports[0]
    summary = [c.title(interval=True) for c in columns("summary")]
    markdown = render_markdown(report).splitlines()[4]  # after "## Summary"
    assert markdown == "| " + " | ".join(summary) + " |"
    html_head = re.search(r"<thead><tr>(.*?)</tr></thead>", render_html(report))
    assert html_head is not None
    assert re.findall(r"<th>(.*?)</th>", html_head[1]) == [h.replace("&", "&amp;") for h in summary]
    assert terminal_headers(report) == [c.stacked for c in columns("compact")]
    assert report.to_dict()["columns"] == describe("summary")
    csv_header = render_csv(report).splitlines()[0].split(",")
    assert csv_header == [f for c in columns("csv") for f in c.fields]


def test_a_new_entry_reaches_every_format(
    reports: list[RunReport], monkeypatch: pytest.MonkeyPatch
) -> None:
    added = ReportColumn("ok", "ok requests", "", text)
    monkeypatch.setattr(registry, "COLUMNS", (*COLUMNS, added))
    report = reports[0]
    assert render_markdown(report).splitlines()[4]  # after "## Summary".endswith("| ok requests |")
    assert "<th>ok requests</th>" in render_html(report)
    assert terminal_headers(report)[-1] == "ok\nrequests"
    assert describe("summary")[-1]["key"] == "ok"
    assert render_csv(report).splitlines()[0].endswith(",ok")
    page = Console(width=250, record=True)
    page.print(*terminal_tables(report, 250, "summary"))
    assert re.search(r"\s30\n", page.export_text())  # the value, right-aligned, last


def test_mean_and_std_reach_every_format(reports: list[RunReport]) -> None:
    for report in reports:  # exact, and from the stored histograms
        row = report.stages[0]
        mean, std = f"{row['ttft_mean_ms']:,.1f}", f"{row['ttft_std_ms']:,.1f}"
        assert all(report.to_dict()["stages"][0][f"{m}_{s}_ms"] is not None
                   for m in ("ttft", "itl", "tpot", "e2e") for s in ("mean", "std"))  # fmt: skip
        markdown = render_markdown(report)
        assert "| p99.9 | mean | std | p50 95% CI |" in markdown
        assert re.search(
            rf"\| TTFT \| 30 \|.*\| {re.escape(mean)} \| {re.escape(std)} \|", markdown
        )
        html = render_html(report)
        assert "<th>mean</th><th>std</th>" in html and f'<td class="n">{std}</td>' in html
        header = render_csv(report).splitlines()[0].split(",")
        assert {"ttft_mean_ms", "ttft_std_ms", "e2e_mean_ms", "e2e_std_ms"} <= set(header)
        page = Console(width=120, record=True)
        page.print(*terminal_tables(report, 120, "summary", shown=select(wide=True)))
        assert re.search(rf"\s{re.escape(mean)}\s+{re.escape(std)}\s", page.export_text())
