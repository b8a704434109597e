"""A gateway's fallbacks: forwardable kinds only, names unique with the primary's."""

from __future__ import annotations

from typing import Any

import pytest

from scenarios.gateway_config import parse_gateway_config
from scenarios.loader import ScenarioError


def _config(fallbacks: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "primary": {
            "name": "p",
            "kind": "openai",
            "base_url": "http://127.0.0.1:9/v1",
            "model": "m",
        },
        "fallbacks": fallbacks,
        "regions": ["eu"],
    }


def test_fallbacks_are_providers_tried_in_order() -> None:
    config = parse_gateway_config(
        _config([{"name": "f1", "kind": "simulated"}, {"name": "f2", "kind": "openai",
                  "base_url": "http://127.0.0.1:10/v1", "model": "x"}])
    )  # fmt: skip
    assert [f.name for f in config.fallbacks] == ["f1", "f2"]
    assert parse_gateway_config(_config([])).fallbacks == []
    # The session's providers are the primary and shadows: fallbacks have no records.
    assert [p.name for p in config.session_scenario().providers] == ["p"]


@pytest.mark.parametrize(
    ("fallbacks", "path", "words"),
    [
        ([{"name": "t", "kind": "tgi", "base_url": "http://127.0.0.1:1"}], "fallbacks", "kind"),
        ([{"name": "p", "kind": "simulated"}], "", "duplicate provider name(s): p"),
        ([{"name": f"f{i}", "kind": "simulated"} for i in range(9)], "fallbacks", "at most 8"),
    ],
)
def test_bad_fallbacks_name_the_field(
    fallbacks: list[dict[str, Any]], path: str, words: str
) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_gateway_config(_config(fallbacks))
    problems = [(p.path, p.message) for p in caught.value.problems]
    assert any(where == path and words in message for where, message in problems), problems
