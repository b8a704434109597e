from __future__ import annotations

from analytics.sections.model import SectionOptions
from analytics.sections.prefix_cache import prefix_cache
from tests.support.sample_report import report, stage_row

OPTIONS = SectionOptions()


def test_the_client_hit_rate_against_the_target_with_the_cache_resets() -> None:
    row = stage_row(
        "api", cache_reported=40, cached_tokens=4800, cache_hit_pct=46.9,
        cache_planned_pct=49.2, cache_target_pct=50.0, cache_reset="ok",
    )  # fmt: skip
    (section,) = prefix_cache(report(stages=[row]), OPTIONS)
    shown = section.shown()
    header = [section.columns[i].name for i in shown]
    assert "server hit rate" not in header  # no telemetry figure yet: the column is left out
    assert section.text_rows(shown) == [
        ["api", "0", "eu", "40", "4,800", "46.9 %", "50.0 %", "49.2 %", "-3.1", "ok"]
    ]


def test_a_provider_that_reports_no_cached_tokens_is_unknown_not_zero() -> None:
    row = stage_row("api", cache_reported=0, cached_tokens=None, cache_hit_pct=None,
                    cache_planned_pct=None, cache_target_pct=None, cache_reset="error")  # fmt: skip
    (section,) = prefix_cache(report(stages=[row]), OPTIONS)
    assert section.text_rows(section.shown()) == [["api", "0", "eu", "0", "–", "–", "error"]]


def test_no_section_for_a_run_without_a_cache_figure() -> None:
    assert prefix_cache(report(), OPTIONS) == []
