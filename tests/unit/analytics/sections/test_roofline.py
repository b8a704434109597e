from __future__ import annotations

from analytics.sections.model import SectionOptions
from analytics.sections.roofline import roofline
from tests.support.sample_report import report, stage_row


def test_only_rows_with_a_ceiling_are_shown() -> None:
    gpu = stage_row(
        "gpu", roofline_per_stream_tok_s=150.0, roofline_batch=3.8, roofline_aggregate_tok_s=570.0,
        roofline_bound="memory", efficiency_pct=67.0,
    )  # fmt: skip
    (section,) = roofline(report(stages=[stage_row("api"), gpu]), SectionOptions())
    assert section.text_rows() == [
        ["gpu", "0", "eu", "3.8", "150.0", "101.0", "67 %", "570", "410", "memory", "$1.20"]
    ]
    assert roofline(report(), SectionOptions()) == []
