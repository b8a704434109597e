"""A scenario's upstreams: loopback ports in the unprivileged range, unique names and ports."""

from __future__ import annotations

from typing import Any

import pytest

from scenarios.loader import ScenarioError, validate_scenario
from scenarios.providers.upstreams import Upstream


def _scenario(upstreams: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": "fo",
        "providers": [
            {"name": "gw", "kind": "openai", "base_url": "http://127.0.0.1:8090/v1", "model": "m"}
        ],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 8},
                    "output_tokens": {"dist": "fixed", "value": 4},
                }
            ]
        },
        "load": {"concurrency": [1], "requests_per_level": 2},
        "upstreams": upstreams,
    }


def test_upstreams_are_part_of_the_scenario() -> None:
    scenario = validate_scenario(
        _scenario([{"name": "a", "port": 9101}, {"name": "b", "port": 9102, "model": "x"}])
    )
    assert [u.base_url for u in scenario.upstreams] == [
        "http://127.0.0.1:9101/v1",
        "http://127.0.0.1:9102/v1",
    ]
    assert validate_scenario(_scenario([])).upstreams == []


@pytest.mark.parametrize(
    ("upstreams", "path", "words"),
    [
        ([{"name": "a", "port": 80}], "upstreams.0.port", "greater than or equal to 1024"),
        ([{"name": "a", "port": 70000}], "upstreams.0.port", "less than or equal to 65535"),
        ([{"name": "a", "port": 9101}, {"name": "a", "port": 9102}], "upstreams", "name 'a'"),
        ([{"name": "a", "port": 9101}, {"name": "b", "port": 9101}], "upstreams", "port '9101'"),
        ([{"name": "a", "port": 9101, "host": "0.0.0.0"}], "upstreams.0.host", "Extra inputs"),
        ([{"name": "a", "port": 9101}] * 9, "upstreams", "at most 8"),
    ],
)
def test_bad_upstreams_name_the_field(
    upstreams: list[dict[str, Any]], path: str, words: str
) -> None:
    with pytest.raises(ScenarioError) as caught:
        validate_scenario(_scenario(upstreams))
    problems = [(p.path, p.message) for p in caught.value.problems]
    assert any(where == path and words in message for where, message in problems), problems


def test_an_upstream_defaults_to_a_healthy_simulator() -> None:
    upstream = Upstream(name="a", port=9101)
    assert upstream.simulate.faults == [] and upstream.model == "simulated"
