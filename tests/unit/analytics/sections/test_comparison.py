from __future__ import annotations

from analytics.sections.comparison import NOTHING, comparison, pareto
from analytics.sections.model import SectionOptions
from tests.support.sample_report import report

ROW = {"stage": 0, "region": "eu", "metric": "ttft_p50", "a_ms": 80.0, "b_ms": 100.0,
       "ratio": 1.25, "ci_low": 1.1, "ci_high": 1.4, "verdict": "gpu slower"}  # fmt: skip


def test_a_comparison_shows_both_figures_the_ratio_and_the_verdict() -> None:
    compared = report(comparison={"a": "api", "b": "gpu", "rows": [ROW, ROW | {"ci_low": None}]})
    (section,) = comparison(compared, SectionOptions())
    assert section.title == "Comparison: gpu vs api"
    assert section.text_rows() == [
        ["0", "eu", "ttft_p50", "80.0", "100.0", "1.25×", "1.10–1.40", "gpu slower"],
        ["0", "eu", "ttft_p50", "80.0", "100.0", "1.25×", "–", "gpu slower"],
    ]
    (empty,) = comparison(report(comparison={"a": "x", "b": "y", "rows": []}), SectionOptions())
    assert empty.rows == () and empty.note == NOTHING
    assert comparison(report(), SectionOptions()) == []


def test_pareto_marks_the_optimal_rows_and_low_samples() -> None:
    point = {"provider": "gpu", "stage": 1, "region": "eu", "cost_per_mtok_output": 0.2,
             "ttft_p99_ms": 201.5, "ttft_p99_low_sample": True, "pareto": True}  # fmt: skip
    (section,) = pareto(report(pareto=[point]), SectionOptions())
    assert section.text_rows() == [["gpu", "1", "eu", "$0.2000", "201.5*", "yes"]]
    assert pareto(report(), SectionOptions()) == []
