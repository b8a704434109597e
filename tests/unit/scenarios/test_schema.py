"""Scenario validation: field paths, YAML lines, examples, and the committed JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scenarios.loader import ScenarioError, load_scenario, parse_scenario
from scenarios.schema import SCHEMA_PATH, scenario_json_schema
from tests.support.builders import VALID_SCENARIO
from tests.support.paths import EXAMPLES

SHIPPED = sorted(EXAMPLES.glob("*.yaml"))


def problems(text: str) -> list[tuple[str, int | None]]:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, "s.yaml")
    return [(p.path, p.line) for p in caught.value.problems]


def test_the_issue_example_is_valid() -> None:
    scenario = parse_scenario(VALID_SCENARIO)
    assert [p.name for p in scenario.providers] == ["sim-fast", "my-vllm"]
    assert scenario.load.concurrency == [1, 8]


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_examples_are_valid(path: Path) -> None:
    load_scenario(path)


def test_unknown_key_is_named_with_its_line() -> None:
    text = VALID_SCENARIO.replace(
        "    simulate: {ttft_ms: 100, itl_ms: 10}",
        "    simulate: {ttft_ms: 100, itl_ms: 10, itl: 3}",
    )
    assert problems(text) == [("providers.0.simulate.itl", 5)]


def test_negative_number_and_wrong_type() -> None:
    text = VALID_SCENARIO.replace("ttft_ms: 100,", "ttft_ms: -1,").replace(
        "requests_per_level: 50", "requests_per_level: many"
    )
    assert problems(text) == [("providers.0.simulate.ttft_ms", 5), ("load.requests_per_level", 18)]


def test_empty_provider_list() -> None:
    text = (
        VALID_SCENARIO.split("providers:", maxsplit=1)[0]
        + "providers: []\n"
        + VALID_SCENARIO.split("workload:")[1].join(["workload:", ""])
    )
    assert ("providers", 2) in problems(text)


def test_duplicate_provider_names_and_bad_bounds() -> None:
    text = VALID_SCENARIO.replace("name: my-vllm", "name: sim-fast").replace(
        "min: 16, max: 512", "min: 600, max: 512"
    )
    found = dict(problems(text))
    assert "providers" in found
    assert "workload.mix.1.output_tokens" in found


def test_unknown_kind_and_unsafe_env_name() -> None:
    text = VALID_SCENARIO.replace("kind: openai", "kind: opneai")
    assert problems(text)[0][0] == "providers.1.kind"
    text = VALID_SCENARIO.replace("api_key_env: MY_KEY", "api_key_env: sk-123")
    assert problems(text) == [("providers.1.api_key_env", 10)]


def test_invalid_yaml_reports_line() -> None:
    assert problems("name: x\nproviders: [\n")[0][1] is not None


def test_json_files_load(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps(parse_scenario(VALID_SCENARIO).model_dump(mode="json")))
    assert load_scenario(path).name == "ok"


def test_committed_json_schema_is_current() -> None:
    committed = json.loads(SCHEMA_PATH.read_text())
    assert committed == scenario_json_schema(), "regenerate: tokenbench schema > " + str(
        SCHEMA_PATH
    )
