"""Server telemetry in the report (analytics/telemetry/metrics.py): per stage mean and max over the
scrapes taken while the stage's requests ran, how the scrapes went, the timeline of queue
depth and KV use against TTFT, and the table rows the text formats print."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from analytics.report.build import build_report
from analytics.store.db import connect
from analytics.telemetry.metrics import (
    TELEMETRY_HEADER,
    server_metrics,
    telemetry_rows,
    telemetry_timeline,
)
from tests.support.builders import REPORT_SCENARIO, evenly_paced, store_run
from tests.support.scrapes import store_scraped_run

RUN = "run-telemetry"


@pytest.fixture
def con(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    """A run of 10 requests, one a second, with scrapes before, during and after them."""
    con = connect(tmp_path / "report.duckdb")
    store_scraped_run(con, RUN)
    return con


def test_the_summary_covers_the_stage_span_only(con: duckdb.DuckDBPyConnection) -> None:
    section = server_metrics(con, RUN)
    figures = {r["metric"]: r for r in section["summary"]}
    # The idle scrape before the first send and the failed one after are not figures.
    assert figures["running_requests"]["samples"] == 9
    assert figures["running_requests"]["mean"] == 1.0
    assert figures["waiting_requests"]["max"] == 2.0
    assert figures["kv_cache_usage"]["max"] == pytest.approx(0.9)
    assert figures["generation_tokens_per_s"]["mean"] == pytest.approx(100.0)
    assert "generation_tokens_total" not in figures
    (scrapes,) = section["scrapes"]
    assert (scrapes["scrapes"], scrapes["errors"], scrapes["top_error"]) == (11, 1, "HTTP 503")


def test_a_run_without_scrapes_has_an_empty_section(tmp_path: Path) -> None:
    con = connect(tmp_path / "plain.duckdb")
    scenario = {**REPORT_SCENARIO, "providers": REPORT_SCENARIO["providers"][:1]}
    store_run(con, "plain", scenario, {("api", 0): evenly_paced(3)})
    assert server_metrics(con, "plain") == {"summary": [], "scrapes": []}
    assert telemetry_timeline(con, "plain")["series"] == []
    report = build_report(con, "plain")
    assert report.to_dict()["server_metrics"] == {"summary": [], "scrapes": []}
    assert "server_timeline" not in report.plots


def test_the_timeline_aligns_server_figures_with_ttft(con: duckdb.DuckDBPyConnection) -> None:
    timeline = telemetry_timeline(con, RUN)
    assert timeline["buckets"] == 11  # the scrapes of the one shard attempt
    (series,) = timeline["series"]
    values = series["values"]
    assert set(values) == {"running_requests", "waiting_requests", "kv_cache_usage", "ttft_p50_ms"}
    assert len(timeline["t_s"]) == timeline["buckets"]
    assert all(v is None or v == pytest.approx(100.0) for v in values["ttft_p50_ms"])
    assert max(v or 0 for v in values["waiting_requests"]) == 2.0
    assert max(v or 0 for v in values["kv_cache_usage"]) <= 1


def test_the_report_carries_the_section_and_the_table_rows(
    con: duckdb.DuckDBPyConnection,
) -> None:
    report = build_report(con, RUN)
    assert report.to_dict()["server_metrics"]["summary"]
    assert report.plots["server_timeline"]["series"]
    (row,) = telemetry_rows(report.server_metrics)
    assert len(row) == len(TELEMETRY_HEADER)
    cells = dict(zip(TELEMETRY_HEADER, row, strict=True))
    assert cells["running max"] == "1" and cells["KV max"] == "90.0%"
    assert cells["GPU util"] == "–"  # no DCGM exporter was scraped
    assert cells["failed"] == "1 (HTTP 503)"
