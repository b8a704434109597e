"""Document caps: YAML aliases, values (aliases expanded) and depth are counted while the
document is composed, and decoded JSON is held to the same caps; every refusal is a
ScenarioError with a line where there is one, never a RecursionError or a hang."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import yaml
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from scenarios import limits
from scenarios.gateway_config import load_gateway_config
from scenarios.loader import (
    BoundedLoader,
    ScenarioError,
    _BoundedComposer,
    _PyParser,
    check_document,
    load_scenario,
    parse_scenario,
    read_yaml,
)

SCENARIO = """\
name: anchors
providers:
  - &sim {name: a, kind: simulated, simulate: {ttft_ms: 5, itl_ms: 1}}
  - {<<: *sim, name: b}
workload:
  mix:
    - {prompt_tokens: &len {dist: fixed, value: 4}, output_tokens: *len}
load: {concurrency: [1], requests_per_level: 2}
"""


def bomb(levels: int, width: int = 10) -> str:
    """A 'billion laughs' document: each level is ``width`` aliases of the previous one,
    so it expands to width**levels values. Nine levels of ten fit in ~400 bytes."""
    lines = ["a0: &a0 [" + ", ".join(['"lol"'] * width) + "]"]
    for level in range(1, levels):
        aliases = ", ".join([f"*a{level - 1}"] * width)
        lines.append(f"a{level}: &a{level} [{aliases}]")
    return "\n".join(lines) + "\n"


def refusal(text: str) -> tuple[str, int | None]:
    with pytest.raises(ScenarioError) as caught:
        read_yaml(text, "doc.yaml")
    (problem,) = caught.value.problems
    return problem.message, problem.line


class PurePythonLoader(_BoundedComposer, _PyParser, SafeConstructor, Resolver):
    """The loader as built where PyYAML has no libyaml."""

    def __init__(self, stream: str) -> None:
        _PyParser.__init__(self, stream)
        _BoundedComposer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)


def test_anchors_and_merge_keys_still_work() -> None:
    scenario = parse_scenario(SCENARIO)
    assert [p.name for p in scenario.providers] == ["a", "b"]
    assert scenario.workload.mix[0].output_tokens == scenario.workload.mix[0].prompt_tokens


def test_line_numbers_survive() -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(SCENARIO.replace("requests_per_level: 2", "requests_per_level: 0"))
    (problem,) = caught.value.problems
    assert (problem.path, problem.line) == ("load.requests_per_level", 8)


def test_the_alias_bomb_is_refused_before_it_is_expanded() -> None:
    text = (
        "name: x\nproviders: [{name: sim, kind: simulated}]\n"
        "load: {concurrency: [1], requests_per_level: 2}\nbomb:\n"
    ) + "".join(f"  {line}\n" for line in bomb(9).splitlines())
    assert len(text.encode()) < 700  # the size of the bomb: 10^9 values expanded
    tracemalloc.start()
    try:
        with pytest.raises(ScenarioError) as caught:
            parse_scenario(text, "bomb.yaml")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    (problem,) = caught.value.problems
    assert f"more than {limits.MAX_DOCUMENT_NODES} values" in problem.message
    assert problem.line is not None and problem.line <= 10
    assert peak < 5 * 1024 * 1024  # nothing was expanded (it took 500 MB before)


def test_too_many_aliases() -> None:
    anchors = "base: &x 1\n"
    ok = anchors + "list: [" + ", ".join(["*x"] * limits.MAX_YAML_ALIASES) + "]\n"
    assert len(read_yaml(ok)[0]["list"]) == limits.MAX_YAML_ALIASES
    over = anchors + "list: [" + ", ".join(["*x"] * (limits.MAX_YAML_ALIASES + 1)) + "]\n"
    message, line = refusal(over)
    assert f"more than {limits.MAX_YAML_ALIASES} YAML aliases" in message
    assert line == 2


def nested(depth: int) -> str:
    return "[" * (depth - 1) + "1" + "]" * (depth - 1)


def test_depth_is_capped_in_flow_and_block_style() -> None:
    assert read_yaml(nested(limits.MAX_DOCUMENT_DEPTH))[0] is not None
    message, _ = refusal(nested(limits.MAX_DOCUMENT_DEPTH + 1))
    assert f"more than {limits.MAX_DOCUMENT_DEPTH} levels" in message
    block = "".join("  " * i + "k:\n" for i in range(limits.MAX_DOCUMENT_DEPTH + 1))
    message, line = refusal(block)
    assert "levels deep" in message
    assert line == limits.MAX_DOCUMENT_DEPTH


def test_depth_counts_what_an_alias_brings_along() -> None:
    deep = nested(40)
    text = f"a: &deep {deep}\nb: {'[' * 30}*deep{']' * 30}\n"
    message, line = refusal(text)
    assert "levels deep" in message and line == 2


def test_a_hundred_thousand_brackets_fail_fast_with_the_depth_message() -> None:
    message, _ = refusal("[" * 100_000)
    assert f"more than {limits.MAX_DOCUMENT_DEPTH} levels" in message


def test_recursive_aliases_are_refused() -> None:
    message, line = refusal("a: &a [1, *a]\n")
    assert "inside its own anchor" in message and line == 1


@pytest.mark.parametrize(
    "text",
    ["a: " + "1" * 5000, "a: !!int x", "a: !!timestamp 2020-13-45", "a: !!binary ZZZ"],
)
def test_scalars_a_tag_cannot_hold_are_scenario_errors(text: str) -> None:
    assert refusal(text)[0].startswith("not valid YAML/JSON")


def test_the_pure_python_parser_is_bounded_the_same_way() -> None:
    loader = PurePythonLoader(bomb(9))
    with pytest.raises(yaml.YAMLError, match="values"):
        loader.get_single_node()
    loader = PurePythonLoader(nested(limits.MAX_DOCUMENT_DEPTH + 1))
    with pytest.raises(yaml.YAMLError, match="levels deep"):
        loader.get_single_node()
    loader = PurePythonLoader(SCENARIO)
    node = loader.get_single_node()
    assert node is not None
    assert loader.construct_document(node)["load"]["requests_per_level"] == 2


def test_libyaml_is_used_when_present() -> None:
    if not yaml.__with_libyaml__:
        pytest.skip("PyYAML without libyaml")
    assert "CParser" in [base.__name__ for base in BoundedLoader.__mro__]


def deep_list(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth - 1):
        value = [value]
    return value


def test_decoded_json_is_held_to_the_same_caps() -> None:
    check_document({"a": deep_list(limits.MAX_DOCUMENT_DEPTH - 1)})
    with pytest.raises(ScenarioError, match="levels deep"):
        check_document({"a": deep_list(limits.MAX_DOCUMENT_DEPTH)})
    with pytest.raises(ScenarioError, match="levels deep"):
        check_document(deep_list(200_000))  # iterative: no RecursionError
    with pytest.raises(ScenarioError, match="values"):
        check_document({"a": list(range(limits.MAX_DOCUMENT_NODES))})


def test_shared_references_count_every_use() -> None:
    shared: Any = list(range(1000))
    for _ in range(3):
        shared = [shared] * 10  # 10^3 uses of a 1000-value list
    with pytest.raises(ScenarioError, match="values"):
        check_document({"a": shared})


def test_a_json_file_nested_too_deep_is_a_scenario_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ScenarioError, match="levels deep"):
        load_scenario(path)
    path.write_text(json.dumps({"name": "x", "extra": deep_list(100)}))
    with pytest.raises(ScenarioError, match="levels deep"):
        load_scenario(path)


def test_gateway_configs_use_the_bounded_loader(tmp_path: Path) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text(bomb(9))
    with pytest.raises(ScenarioError, match="values"):
        load_gateway_config(path)
