"""Per-run overrides: one merge for the command line and REST, bounds declared once."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import ValidationError

from api.schemas import RunOverrides
from scenarios import limits
from scenarios.loader import ScenarioError
from scenarios.overrides import Overrides, apply_overrides, parse_overrides

OPEN: dict[str, Any] = {
    "name": "open",
    "regions": ["eu"],
    "load": {"rate": {"rps": [2.0], "arrival": "constant"}, "duration_s": 10.0},
}
CLOSED: dict[str, Any] = {
    "name": "closed",
    "load": {"concurrency": [1, 8], "requests_per_level": 5},
}


def test_concurrency_makes_an_open_loop_closed() -> None:
    result = apply_overrides(OPEN, Overrides(concurrency=[4]))
    assert result["load"] == {"concurrency": [4], "duration_s": 10.0}


def test_rps_makes_a_closed_loop_open_and_keeps_the_other_rate_fields() -> None:
    closed = apply_overrides(CLOSED, Overrides(rps=[3.0, 6.0]))
    assert closed["load"] == {"rate": {"rps": [3.0, 6.0]}, "requests_per_level": 5}
    reopened = apply_overrides(OPEN, Overrides(rps=[5.0]))
    assert reopened["load"]["rate"] == {"rps": [5.0], "arrival": "constant"}


def test_regions_requests_and_duration_are_set_and_the_input_is_left_alone() -> None:
    before = repr(OPEN)
    result = apply_overrides(
        OPEN, Overrides(regions=["us", "ap"], requests_per_level=7, duration_s=3.0)
    )
    assert result["regions"] == ["us", "ap"]
    assert result["load"]["requests_per_level"] == 7 and result["load"]["duration_s"] == 3.0
    assert repr(OPEN) == before


def test_no_override_changes_nothing_and_a_missing_load_is_created() -> None:
    assert apply_overrides(CLOSED, Overrides()) == CLOSED
    assert apply_overrides({"name": "x"}, Overrides(concurrency=[2]))["load"] == {
        "concurrency": [2]
    }


@pytest.mark.parametrize(
    ("data", "overrides", "path"),
    [
        ({"load": [1]}, Overrides(concurrency=[1]), "load"),
        ({"load": {"rate": 5}}, Overrides(rps=[1.0]), "load.rate"),
    ],
)
def test_a_section_that_is_not_a_mapping_is_an_error_at_its_path(
    data: dict[str, Any], overrides: Overrides, path: str
) -> None:
    with pytest.raises(ScenarioError) as error:
        apply_overrides(data, overrides)
    assert [problem.path for problem in error.value.problems] == [path]


def test_concurrency_and_rps_together_are_refused() -> None:
    with pytest.raises(ValidationError, match="not both"):
        Overrides(concurrency=[1], rps=[1.0])


@pytest.mark.parametrize(
    ("values", "path"),
    [
        ({"concurrency": [1, 0]}, "load.concurrency.1"),
        ({"rps": [math.inf]}, "load.rate.rps.0"),
        ({"requests_per_level": limits.MAX_REQUESTS_PER_LEVEL + 1}, "load.requests_per_level"),
        ({"duration_s": -1.0}, "load.duration_s"),
        ({"regions": []}, "regions"),
    ],
)
def test_parsed_values_are_refused_at_the_scenario_path_they_land_at(
    values: dict[str, Any], path: str
) -> None:
    with pytest.raises(ScenarioError) as error:
        parse_overrides(values)
    assert [problem.path for problem in error.value.problems] == [path]


def test_the_rest_schema_is_the_scenario_model() -> None:
    """One declaration of the bounds: REST's RunOverrides is the scenarios model."""
    assert issubclass(RunOverrides, Overrides)
    assert RunOverrides.model_fields.keys() == Overrides.model_fields.keys()
    with pytest.raises(ValidationError):
        RunOverrides(concurrency=[limits.MAX_CONCURRENCY + 1])
