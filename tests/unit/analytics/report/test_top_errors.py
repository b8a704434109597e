"""The most frequent error messages per stage × provider × region, on real DuckDB files:
counted from the raw records or from the shards' stored lists alike, redacted, in every
format; and rates that count successful requests only."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from analytics.render.html_report import render_html
from analytics.render.markdown import render_markdown
from analytics.render.report_formats import render_json
from analytics.report.build import build_report
from analytics.report.stored import ExactLimits
from analytics.report.top_errors import TOP_MESSAGES, top_errors
from analytics.sections.errors import errors
from analytics.sections.model import SectionOptions
from analytics.store.db import connect
from tests.support.builders import MS, REPORT_SCENARIO, S, failed_result, ok_result, store_run
from workers.client.errors import ErrorClass

FORCE_STORED = ExactLimits(ok_requests=0, itl_gaps=0)
REFUSED = "ConnectError: [Errno 111] Connection refused"


@pytest.fixture
def run(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    """'api' refuses every request of stage 0 (12 refusals, 5 overloads whose request ids
    differ, 2 rate limits, 1 bad gateway); 'gpu' answers 20 and fails 3 in stage 1."""
    con = connect(tmp_path / "e.duckdb")
    down = [failed_result(10 * S + i * MS, ErrorClass.CONNECT, REFUSED) for i in range(12)]
    down += [
        failed_result(10 * S + i * MS, ErrorClass.HTTP_5XX, f"HTTP 503: overloaded, id {90210 + i}")
        for i in range(5)
    ]
    down += [
        failed_result(10 * S + i * MS, ErrorClass.HTTP_429, "HTTP 429: slow") for i in range(2)
    ]
    down += [failed_result(10 * S, ErrorClass.HTTP_5XX, "HTTP 502: bad gateway")]
    up = [ok_result(10 * S + i * 200 * MS, 100.0, [5.0] * 9) for i in range(20)]
    up += [failed_result(11 * S + i * MS, ErrorClass.TIMEOUT, "ReadTimeout") for i in range(3)]
    store_run(con, "run", REPORT_SCENARIO, {("api", 0): down, ("gpu", 1): up})
    return con


EXPECTED = [
    {"stage": 0, "provider": "api", "region": "local", "error_class": "connect",
     "message": REFUSED, "count": 12},
    {"stage": 0, "provider": "api", "region": "local", "error_class": "http_5xx",
     "message": "HTTP 503: overloaded, id <n>", "count": 5},
    {"stage": 0, "provider": "api", "region": "local", "error_class": "http_429",
     "message": "HTTP 429: slow", "count": 2},
    {"stage": 1, "provider": "gpu", "region": "local", "error_class": "timeout",
     "message": "ReadTimeout", "count": 3},
]  # fmt: skip


def test_each_group_lists_its_most_frequent_messages(run: duckdb.DuckDBPyConnection) -> None:
    report = build_report(run, "run")
    assert report.percentiles["method"] == "exact"
    assert report.errors == EXPECTED
    assert len([e for e in report.errors if e["provider"] == "api"]) == TOP_MESSAGES
    assert json.loads(render_json(report))["errors"] == EXPECTED


def test_a_large_run_reads_the_stored_lists_and_agrees(run: duckdb.DuckDBPyConnection) -> None:
    stored = build_report(run, "run", exact_limits=FORCE_STORED)
    assert stored.percentiles["method"] == "log_histogram"
    assert stored.errors == EXPECTED
    assert top_errors(run, "run", stored=True) == top_errors(run, "run", stored=False)


def test_messages_stored_by_an_older_version_are_redacted_when_shown(
    run: duckdb.DuckDBPyConnection,
) -> None:
    # As a version that redacted less stored them: a key and a request id in the text.
    run.execute(
        "UPDATE request_records SET error_message = 'HTTP 429: slow, key sk-abcdefghijkl' "
        "|| ' request ' || seq::VARCHAR || '0000' WHERE error_class = 'http_429'"
    )
    (entry,) = [e for e in build_report(run, "run").errors if e["error_class"] == "http_429"]
    # Both rows read alike once redacted, so they count as one message.
    assert (entry["message"], entry["count"]) == ("HTTP 429: slow, key [redacted] request <n>", 2)


def test_a_v7_file_gets_the_stored_lists_back_filled(tmp_path: Path) -> None:
    con = connect(tmp_path / "old.duckdb")
    store_run(
        con,
        "run",
        REPORT_SCENARIO,
        {
            ("api", 0): [
                failed_result(10 * S + i * MS, ErrorClass.CONNECT, REFUSED) for i in range(4)
            ]
        },
    )
    con.execute("DROP TABLE shard_error_messages")
    con.execute("DELETE FROM schema_version WHERE version >= 8")
    con.close()
    con = connect(tmp_path / "old.duckdb")
    assert con.execute("SELECT error_class, message, n FROM shard_error_messages").fetchall() == [
        ("connect", REFUSED, 4)
    ]


def test_rates_count_successful_requests_only(run: duckdb.DuckDBPyConnection) -> None:
    for limits in (None, FORCE_STORED):
        rows = {r["provider"]: r for r in build_report(run, "run", exact_limits=limits).stages}
        down, up = rows["api"], rows["gpu"]
        # Every request of 'api' failed: nothing was served, however fast it was refused.
        assert down["request_rate"] == 0
        assert down["attempted_request_rate"] > 0
        assert down["output_tok_s"] in (None, 0)
        assert 0 < up["request_rate"] < up["attempted_request_rate"]
        assert down["errors"] == 20 and up["errors"] == 3  # error counts as before


def test_every_text_format_shows_the_section(run: duckdb.DuckDBPyConnection) -> None:
    report = build_report(run, "run")
    (section,) = errors(report, SectionOptions())
    rows = section.text_rows()
    assert rows[0] == ["api", "0", "local", "12 of 20", "connect", REFUSED]
    # 20 failed, 19 shown: the bad gateway is counted among the others.
    assert rows[3] == ["api", "0", "local", "1 of 20", "", "(other messages)"]
    assert "api s0 local " in section.note and "(20 of 20 failed)" in section.note
    markdown = render_markdown(report)
    assert "## Most frequent errors" in markdown
    assert (
        "| api | 0 | local | 5 of 20 | http_5xx | HTTP 503: overloaded, id &lt;n&gt; |" in markdown
    )
    html = render_html(report)
    assert '<h2 id="errors">Most frequent errors</h2>' in html
    assert "<td>HTTP 503: overloaded, id &lt;n&gt;</td>" in html


def test_a_run_without_failures_has_no_section(tmp_path: Path) -> None:
    con = connect(tmp_path / "ok.duckdb")
    store_run(con, "run", REPORT_SCENARIO, {("api", 0): [ok_result(10 * S, 100.0, [5.0])]})
    report = build_report(con, "run")
    assert report.errors == [] and errors(report, SectionOptions()) == []
    assert "Most frequent errors" not in render_markdown(report)
