from __future__ import annotations

from analytics.sections.model import SectionOptions
from analytics.sections.spend import spend
from tests.support.sample_report import report

SPEND = {
    "rows": [
        {"provider": "api", "input_tokens": 1500, "output_tokens": 300, "usd": 0.0042,
         "bound_usd": 0.01},
    ],
    "usd": 0.0042, "bound_usd": 0.01, "max_cost_usd": 0.5, "stop_reason": None,
    "stop_detail": None,
}  # fmt: skip


def test_spend_beside_its_bound() -> None:
    (section,) = spend(report(spend=SPEND), SectionOptions())
    assert section.text_rows() == [["api", "1,500", "300", "$0.0042", "$0.0100"]]
    assert "budget.max_cost_usd" in section.note


def test_a_run_stopped_by_its_budget_says_so() -> None:
    stopped = SPEND | {"stop_reason": "budget", "stop_detail": "budget: the run spent $0.5"}
    _table, line = spend(report(spend=stopped), SectionOptions())
    assert line.warning and line.lines == ("stopped by its budget: budget: the run spent $0.5",)


def test_none_without_a_priced_provider() -> None:
    assert spend(report(), SectionOptions()) == []
