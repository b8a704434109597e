"""The server-telemetry chart (analytics/render/telemetry_chart.py): queue depth and KV use on the
top panel (KV on the right axis), TTFT below, on one clock; no chart without scrapes."""

from __future__ import annotations

from pathlib import Path

from analytics.render.charts import palette, server_telemetry_figure
from analytics.render.html_report import render_html
from analytics.render.telemetry_chart import telemetry_figure
from analytics.report.build import build_report
from analytics.store.db import connect
from tests.support.builders import REPORT_SCENARIO, evenly_paced, store_run
from tests.support.scrapes import store_scraped_run


def test_the_chart_shows_queue_kv_and_ttft(tmp_path: Path) -> None:
    con = connect(tmp_path / "chart.duckdb")
    store_scraped_run(con, "r")
    report = build_report(con, "r")
    fig = telemetry_figure(report, palette(report))
    assert fig is not None
    names = [trace.name for trace in fig.data]
    assert names == [
        "api · running",
        "api · waiting",
        "api · KV cache in use",
        "api · TTFT p50",
    ]
    kv = fig.data[2]
    assert kv.yaxis == "y2" and max(v for v in kv.y if v is not None) <= 1
    assert fig.data[3].yaxis == "y3"  # the bottom panel
    assert fig.data[0].x == fig.data[3].x  # one clock for both panels
    assert server_telemetry_figure(report) is not None
    layout = fig.to_plotly_json()["layout"]
    axes = {k: v for k, v in layout.items() if k.startswith(("xaxis", "yaxis"))}
    assert len(axes) == 5 and all(axis.get("tickformat") for axis in axes.values()), axes
    page = render_html(report)
    assert 'id="chart-server-telemetry"' in page and "HTTP 503" in page


def test_no_chart_without_scrapes(tmp_path: Path) -> None:
    con = connect(tmp_path / "plain.duckdb")
    scenario = {**REPORT_SCENARIO, "providers": REPORT_SCENARIO["providers"][:1]}
    store_run(con, "plain", scenario, {("api", 0): evenly_paced(3)})
    report = build_report(con, "plain")
    assert telemetry_figure(report, palette(report)) is None
    assert server_telemetry_figure(report) is None
    assert 'id="server-metrics"' not in render_html(report)
