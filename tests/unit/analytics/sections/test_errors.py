from __future__ import annotations

from analytics.sections.errors import OTHERS, errors
from analytics.sections.model import SectionOptions
from tests.support.sample_report import report, stage_row

ERROR = {"stage": 0, "provider": "api", "region": "eu", "error_class": "http_429",
         "message": "HTTP 429: slow down", "count": 1500}  # fmt: skip


def test_each_message_of_its_group_s_failures_then_the_others() -> None:
    stages = [stage_row("api", errors=2000, attempted_request_rate=4.25, requests=5000)]
    (section,) = errors(report(stages=stages, errors=[ERROR]), SectionOptions())
    assert section.text_rows() == [
        ["api", "0", "eu", "1,500 of 2,000", "http_429", "HTTP 429: slow down"],
        ["api", "0", "eu", "500 of 2,000", "", OTHERS],
    ]
    assert "api s0 eu 4.25 (2,000 of 5,000 failed)" in section.note
    assert errors(report(), SectionOptions()) == []
