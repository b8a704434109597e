from __future__ import annotations

from analytics.report.columns import select
from analytics.report.formatting import CAPTION, LOW_SAMPLE_NOTE
from analytics.sections.model import SectionOptions
from analytics.sections.summary import percentiles, summary
from tests.support.sample_report import report


def test_the_summary_has_the_asked_columns_and_the_footnotes() -> None:
    (full,) = summary(report(), SectionOptions())
    assert full.columns[7].name == "TTFT p50 [95% CI]" and full.columns[7].label == "TTFT\np50"
    assert [c.name for c in full.columns if c.key] == ["provider", "stage", "region"]
    assert full.text_rows()[0][:6] == ["api", "0", "eu", "4", "120", "2 (http_429: 2)"]
    assert full.note.split("\n")[:2] == [CAPTION, LOW_SAMPLE_NOTE]
    (compact,) = summary(report(), SectionOptions(summary=select(), interval=False))
    assert [c.name for c in compact.columns][-1] == "$/1M out"
    assert "TTFT p99" in [c.name for c in compact.columns]
    assert compact.text_rows()[0][7] == "240.0*"  # a low sample is flagged


def test_percentiles_per_metric_leave_out_intervals_no_row_has() -> None:
    (section,) = percentiles(report(), SectionOptions())
    assert (
        section.split_by == "metric" and section.split_title.format("TTFT") == "TTFT latency (ms)"
    )
    shown = [section.columns[i].name for i in section.shown()]
    assert shown[:6] == ["provider", "stage", "region", "metric", "n", "p50"]
    assert "p50 95% CI" not in shown and "p99 95% CI" not in shown
    assert section.text_rows(section.shown())[0][:6] == ["api", "0", "eu", "TTFT", "118", "81.0"]
    assert percentiles(report(stages=[]), SectionOptions()) == []
