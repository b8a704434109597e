"""``load.sweep``, ``load.find_capacity``, ``load.stop_when`` and ``load.saturation`` in the
scenario: what they accept, what they refuse (naming the field), and their bounds."""

from __future__ import annotations

from typing import Any

import pytest

from scenarios import limits
from scenarios.loader import ScenarioError, validate_scenario
from scenarios.model import Scenario


def data(load: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "name": "adaptive",
        "providers": [{"name": "a", "kind": "simulated"}, {"name": "b", "kind": "simulated"}],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 4},
                    "output_tokens": {"dist": "fixed", "value": 2},
                }
            ]
        },
        "load": load,
        **extra,
    }


def problems(document: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ScenarioError) as caught:
        validate_scenario(document)
    return {p.path: p.message for p in caught.value.problems}


CAPACITY = {"slo": {"ttft_ms": 500}}


def test_a_capacity_search_takes_a_percentage_and_defaults_the_reports_slo() -> None:
    scenario = validate_scenario(
        data({"find_capacity": {**CAPACITY, "precision": "5%"}, "requests_per_level": 600})
    )
    search = scenario.load.find_capacity
    assert search is not None
    assert (search.precision, search.attainment, search.confidence, search.by) == (
        0.05, 0.99, 0.95, "rate",
    )  # fmt: skip
    assert scenario.load.adaptive and scenario.load.levels() == []
    # The report judges goodput by the search's SLO when the scenario names none.
    assert scenario.report_slo().ttft_ms == 500
    given = validate_scenario(
        data({"find_capacity": CAPACITY, "requests_per_level": 600}, slo={"e2e_ms": 9000})
    )
    assert given.report_slo().e2e_ms == 9000 and given.report_slo().ttft_ms is None


def test_over_saturation_stops_decided_stages_by_default_and_fixed_ones_only_when_asked() -> None:
    sweep = validate_scenario(data({"sweep": {"points": 4}, "requests_per_level": 10}))
    assert sweep.load.saturation_action == "stop"
    fixed = validate_scenario(data({"rate": {"rps": [5]}, "requests_per_level": 10}))
    assert fixed.load.saturation_action == "off"
    marked = validate_scenario(
        data({"rate": {"rps": [5]}, "requests_per_level": 10, "saturation": {"action": "mark"}})
    )
    assert marked.load.saturation_action == "mark"


@pytest.mark.parametrize(
    ("load", "path", "fragment"),
    [
        ({"find_capacity": {"slo": {}}, "requests_per_level": 10}, "load.find_capacity.slo",
         "at least one"),
        ({"find_capacity": CAPACITY}, "load", "needs requests_per_level"),
        ({"sweep": {"points": 3}, "duration_s": 10}, "load", "needs requests_per_level"),
        ({"sweep": {"points": 3}, "concurrency": [1], "requests_per_level": 5}, "load",
         "not both concurrency and sweep"),
        ({"find_capacity": {**CAPACITY, "precision": "lots"}, "requests_per_level": 5},
         "load.find_capacity.precision", "number"),
        ({"find_capacity": {**CAPACITY, "attainment": 1.0}, "requests_per_level": 5},
         "load.find_capacity.attainment", "less than or equal"),
        ({"concurrency": [1], "requests_per_level": 5, "stop_when": {"quantile": 0.99}},
         "load.stop_when.rel_ci", "Field required"),
        ({"concurrency": [1], "requests_per_level": 5,
          "stop_when": {"rel_ci": 0.05, "metric": "itl"}}, "load.stop_when.metric", "ttft"),
    ],
)  # fmt: skip
def test_bad_sections_are_refused_at_their_field(
    load: dict[str, Any], path: str, fragment: str
) -> None:
    found = problems(data(load))
    assert path in found and fragment in found[path], found


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("sweep.points", limits.MAX_SWEEP_POINTS + 1),
        ("find_capacity.max_stages", limits.MAX_SEARCH_STAGES + 1),
        ("find_capacity.max_stages", limits.MIN_SEARCH_STAGES - 1),
        ("find_capacity.precision", limits.MIN_PRECISION / 2),
        ("find_capacity.max_rps", limits.MAX_RPS * 2),
        ("sweep.knee_factor", limits.MAX_KNEE_FACTOR * 2),
    ],
)
def test_every_new_field_is_bounded(field: str, value: float) -> None:
    section, name = field.split(".")
    body: dict[str, Any] = {"points": 3} if section == "sweep" else dict(CAPACITY)
    body[name] = value
    assert f"load.{field}" in problems(data({section: body, "requests_per_level": 600}))


def test_a_search_needs_stages_large_enough_to_show_its_attainment() -> None:
    found = problems(data({"find_capacity": CAPACITY, "requests_per_level": 300}))
    assert "only by stages of at least 498 requests" in found["load"]
    lenient = {"find_capacity": {**CAPACITY, "attainment": 0.9}, "requests_per_level": 46}
    assert validate_scenario(data(lenient)).load.find_capacity is not None


def test_a_search_cannot_plan_more_requests_than_a_run_may_send() -> None:
    load = {
        "find_capacity": {**CAPACITY, "max_stages": limits.MAX_SEARCH_STAGES},
        "requests_per_level": limits.MAX_REQUESTS_PER_LEVEL,
    }
    message = problems(data(load))[""]
    assert "a sweep or search: its most stages" in message and "more than the" in message
    small = Scenario.model_validate(data({"sweep": {"points": 3}, "requests_per_level": 100}))
    assert small.planned_requests() == (2 + 3) * 100 * 2  # stages × requests × providers
