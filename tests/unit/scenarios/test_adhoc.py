"""The ad-hoc flags of `tokenbench run` as a scenario document (scenarios/adhoc.py)."""

from __future__ import annotations

import pytest

from scenarios.adhoc import (
    DEFAULT_CONCURRENCY,
    AdHocFlags,
    build_document,
    parse_list,
    target_base_url,
)
from scenarios.errors import BadInput
from scenarios.loader import validate_scenario

BASE = {
    "name": "file",
    "providers": [
        {"name": "a", "kind": "openai", "base_url": "http://a/v1", "model": "m1"},
        {"name": "s", "kind": "simulated"},
    ],
    "workload": {
        "mix": [
            {"prompt_tokens": {"dist": "fixed", "value": 10},
             "output_tokens": {"dist": "uniform", "min": 1, "max": 5}},
            {"prompt_tokens": {"dist": "fixed", "value": 20},
             "output_tokens": {"dist": "fixed", "value": 7}},
        ]
    },
    "load": {"rate": {"rps": [1.0], "arrival": "constant"}, "duration_s": 5},
}  # fmt: skip


@pytest.mark.parametrize(
    ("target", "base_url"),
    [
        ("http://h:8000", "http://h:8000/v1"),
        ("http://h:8000/", "http://h:8000/v1"),
        ("http://h:8000/v1", "http://h:8000/v1"),
        ("https://gw.example/openai/v1", "https://gw.example/openai/v1"),
    ],
)
def test_a_bare_server_gets_v1_any_other_path_is_kept(target: str, base_url: str) -> None:
    assert target_base_url(target) == base_url


def test_flags_alone_build_a_valid_scenario_with_documented_defaults() -> None:
    document = build_document(None, AdHocFlags(target="http://h:8000", model="m"))
    scenario = validate_scenario(document)
    assert scenario.load.concurrency == DEFAULT_CONCURRENCY
    assert [p.model_dump(include={"name", "kind", "model"}) for p in scenario.providers] == [
        {"name": "target", "kind": "openai", "model": "m"}
    ]


def test_flags_override_the_file_and_leave_the_rest() -> None:
    flags = AdHocFlags(concurrency=[4, 16], requests=9, output_tokens=32, name="mine")
    document = build_document(BASE, flags)
    scenario = validate_scenario(document)
    assert scenario.name == "mine"
    assert scenario.load.concurrency == [4, 16] and scenario.load.rate is None
    assert scenario.load.requests_per_level == 9 and scenario.load.duration_s == 5
    # Every class's answer is fixed; its prompt is the file's.
    assert [(c.prompt_tokens.model_dump(), c.output_tokens.model_dump()) for c in
            scenario.workload.mix] == [
        ({"dist": "fixed", "value": 10}, {"dist": "fixed", "value": 32}),
        ({"dist": "fixed", "value": 20}, {"dist": "fixed", "value": 32}),
    ]  # fmt: skip
    assert BASE["load"] == {"rate": {"rps": [1.0], "arrival": "constant"}, "duration_s": 5}


def test_rate_replaces_closed_loop_and_keeps_the_files_arrival_process() -> None:
    closed = {**BASE, "load": {"concurrency": [1], "requests_per_level": 3}}
    scenario = validate_scenario(build_document(closed, AdHocFlags(rate=[2.0, 5.0])))
    assert scenario.load.concurrency == [] or not scenario.load.concurrency
    assert scenario.load.rate is not None and scenario.load.rate.rps == [2.0, 5.0]
    kept = validate_scenario(build_document(BASE, AdHocFlags(rate=[3.0])))
    assert kept.load.rate is not None and kept.load.rate.arrival == "constant"


def test_model_without_target_sets_the_model_of_openai_like_providers_only() -> None:
    document = build_document(BASE, AdHocFlags(model="m2", api_key_env="MY_KEY"))
    assert document["providers"][0] == {
        "name": "a", "kind": "openai", "base_url": "http://a/v1", "model": "m2",
        "api_key_env": "MY_KEY",
    }  # fmt: skip
    assert document["providers"][1] == {"name": "s", "kind": "simulated"}


def test_target_replaces_the_providers_of_the_file() -> None:
    document = build_document(BASE, AdHocFlags(target="http://t:1", model="x"))
    assert [p["name"] for p in document["providers"]] == ["target"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (AdHocFlags(), "give a scenario file"),
        (AdHocFlags(target="http://t"), "give a scenario file"),
        (AdHocFlags(concurrency=[1], rate=[1.0], target="http://t", model="m"), "not both"),
    ],
)
def test_contradictions_are_bad_input(flags: AdHocFlags, message: str) -> None:
    with pytest.raises(BadInput, match=message):
        build_document(None, flags)


def test_target_without_model_over_a_file_is_bad_input() -> None:
    with pytest.raises(BadInput, match="--target needs --model"):
        build_document(BASE, AdHocFlags(target="http://t"))


def test_parse_list_names_the_flag() -> None:
    assert parse_list("1, 8,64", "--concurrency", int) == [1, 8, 64]
    assert parse_list("0.5,2", "--rate", float) == [0.5, 2.0]
    with pytest.raises(BadInput, match="--rate: give comma-separated numbers"):
        parse_list("fast", "--rate", float)
    with pytest.raises(BadInput, match="at least one"):
        parse_list(",", "--rate", float)


def test_tokenizer_flag_names_the_workload_tokenizer() -> None:
    flags = AdHocFlags(
        target="http://127.0.0.1:8000", model="m", tokenizer={"hub": "Qwen/Qwen2.5-7B-Instruct"}
    )
    scenario = validate_scenario(build_document(None, flags))
    assert scenario.workload.tokenizer is not None
    assert scenario.workload.tokenizer.hub == "Qwen/Qwen2.5-7B-Instruct"
    assert scenario.workload.mix  # the default lengths stay
