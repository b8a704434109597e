"""analytics/trends/formats.py and analytics/trends/chart.py: every format of a real trend
(two steady runs, then a slow one: tests/unit/analytics/trends/conftest.py), text others
wrote escaped, the regression in each."""

from __future__ import annotations

import csv
import dataclasses
import io
import json

import pytest

from analytics.trends.build import TrendReport
from analytics.trends.chart import figure
from analytics.trends.formats import TREND_FORMATS

HOSTILE = "<b>y</b>|x"  # a name a client asks the trend for


@pytest.fixture(scope="module")
def report(slow_trend: TrendReport) -> TrendReport:
    return dataclasses.replace(slow_trend, title=f"trend of {HOSTILE}")


def test_markdown_names_the_regression_and_escapes_names(report: TrendReport) -> None:
    text = TREND_FORMATS["markdown"].render(report)
    assert text.startswith("# trend of &lt;b&gt;y&lt;/b&gt;|x") and "<b>" not in text
    assert "## Regressions" in text and "regression: TTFT p50 rose to" in text
    assert "## History" in text and "sch-1-r2" in text


def test_csv_has_a_line_per_point_and_the_verdict_on_the_latest(report: TrendReport) -> None:
    rows = list(csv.DictReader(io.StringIO(TREND_FORMATS["csv"].render(report))))
    assert len(rows) == len(report.points) == 3 * 5
    latest = [r for r in rows if r["latest"] == "true"]
    assert {r["run_id"] for r in latest} == {"sch-1-r2"}
    p50 = next(r for r in latest if r["metric"] == "ttft_p50_ms")
    assert p50["regression"] == "true" and float(p50["value"]) > float(p50["band_high"])
    older = next(r for r in rows if r["run_id"] == "sch-1-r0" and r["metric"] == "ttft_p50_ms")
    assert older["regression"] == "" and older["latest"] == "false"


def test_json_is_the_whole_report(report: TrendReport) -> None:
    data = json.loads(TREND_FORMATS["json"].render(report))
    assert [r["metric"] for r in data["regressions"]] == ["ttft_p50_ms"]
    assert data["confidence"] == 0.95 and data["options"]["window"] == 5
    assert len(data["runs"]) == 3 and len(data["rows"]) == 5


def test_html_draws_each_figure_over_time_offline(report: TrendReport) -> None:
    page = TREND_FORMATS["html"].render(report)
    assert page.startswith("<!DOCTYPE html>") and "cdn" not in page.lower().split("<body>")[1]
    assert "&lt;b&gt;y&lt;/b&gt;" in page and "<b>y</b>" not in page.split("<script")[0]
    fig = figure(report)
    titles = [a.text for a in fig.layout.annotations]
    assert titles == [
        "TTFT p50 (ms)",
        "TTFT p99 (ms)",
        "output tok/s (tok/s)",
        "error rate",
        "$/1M output (USD)",
    ]
    rings = [t for t in fig.data if t.name == "regression"]
    assert len(rings) == 1 and rings[0].y == (report.rows[0]["latest"],)
