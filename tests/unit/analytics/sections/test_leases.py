"""analytics/sections/leases.py: the runs that overlapped a provider measured shared."""

from __future__ import annotations

from analytics.sections.leases import shared_endpoints
from analytics.sections.model import SectionOptions
from tests.support.sample_report import report

OVERLAP = {
    "provider": "api",
    "target": "http://h/v1 model=m key=-",
    "run_id": "run-2",
    "other_provider": "other",
    "overlap_s": 1.5,
}


def test_each_overlapping_run_is_named() -> None:
    (section,) = shared_endpoints(report(shared_overlaps=[OVERLAP]), SectionOptions())
    assert section.key == "shared_endpoints" and section.warning
    assert section.text_rows()[0][:3] == ["api", "run-2", "other"]


def test_nothing_without_shared_providers() -> None:
    assert shared_endpoints(report(), SectionOptions()) == []
