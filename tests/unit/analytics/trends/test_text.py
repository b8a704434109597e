"""analytics/trends/text.py: the judgement rows as text, on a real trend whose latest run
regressed (tests/unit/analytics/trends/conftest.py)."""

from __future__ import annotations

from analytics.trends.build import TrendReport
from analytics.trends.text import SPARKS, band_text, judgement_cells, sparkline


def test_sparklines_scale_from_low_to_high() -> None:
    assert sparkline([1.0, 2.0, 3.0]) == SPARKS[0] + SPARKS[4] + SPARKS[-1]
    assert sparkline([5.0, None, 5.0]) == SPARKS[0] + " " + SPARKS[0]
    assert sparkline([]) == ""


def test_the_judgement_row_reads_as_text(slow_trend: TrendReport) -> None:
    row = next(r for r in slow_trend.rows if r["metric"] == "ttft_p50_ms")
    cells = judgement_cells(slow_trend, row)
    assert cells[:4] == ["api", "local", "0", "TTFT p50"]
    assert cells[4][-1] == SPARKS[-1] and cells[-1] == "REGRESSION"
    assert cells[6] == band_text(row) and "–" in cells[6]
    assert cells[7].startswith("+")
