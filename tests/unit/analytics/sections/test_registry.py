from __future__ import annotations

import pytest

from analytics.sections import registry
from analytics.sections.model import Section, SectionOptions
from analytics.sections.registry import REGISTRY, build_sections, registered, section
from tests.support.sample_report import report

# The sections of today, in report order.
ORDER = [
    "answers.capacity",
    "summary.summary",
    "answers.sweep",
    "summary.percentiles",
    "roofline.roofline",
    "sessions.sessions",
    "telemetry.telemetry",
    "failover.failover",
    "comparison.comparison",
    "comparison.pareto",
    "errors.errors",
    "workload.dataset",
    "workload.prompt_lengths",
    "workload.images",
    "workload.tool_calls",
    "workload.token_truth",
    "client.client_health",
    "client.shards",
]


def test_the_sections_come_in_report_order() -> None:
    names = [entry.name.removeprefix("analytics.sections.") for entry in registered()]
    # These in this order; a section added between them does not change it.
    assert [name for name in names if name in ORDER] == ORDER


def test_a_registered_section_reaches_the_report_in_its_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(registry, "REGISTRY", dict(REGISTRY))

    @section(order=25)
    def extra(report_: object, options: SectionOptions) -> list[Section]:
        return [Section("extra", "Extra", lines=("hello",))]

    keys = [s.key for s in build_sections(report())]
    assert keys[keys.index("summary") + 1] == "extra"


def test_two_sections_cannot_take_one_place(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "REGISTRY", dict(REGISTRY))
    registered()
    with pytest.raises(ValueError, match=r"section order 20 of .* is taken by"):

        @section(order=20)
        def clash(report_: object, options: SectionOptions) -> list[Section]:
            return []


def test_a_plain_run_has_only_the_sections_with_something_to_show() -> None:
    assert [s.key for s in build_sections(report())] == ["summary", "percentiles"]
