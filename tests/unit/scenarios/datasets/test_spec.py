"""``workload.dataset``: one source, conversion fields only where a file is converted,
bounded filters, and sampling that fits the workload."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scenarios.datasets.spec import DatasetColumns, DatasetWorkload, LengthFilters
from scenarios.limits import MAX_TOKENS
from scenarios.loader import ScenarioError, validate_scenario

DATASET_ID = "ds-" + "a" * 64
MIX = [
    {"prompt_tokens": {"dist": "fixed", "value": 4}, "output_tokens": {"dist": "fixed", "value": 2}}
]


def _scenario(dataset: dict[str, Any], **workload: Any) -> dict[str, Any]:
    return {
        "name": "ds",
        "providers": [{"name": "sim", "kind": "simulated"}],
        "workload": {"dataset": dataset, **workload},
        "load": {"concurrency": [1], "requests_per_level": 2},
    }


def _problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ScenarioError) as caught:
        validate_scenario(copy.deepcopy(data))
    return [(p.path, p.message) for p in caught.value.problems]


def test_a_dataset_alone_is_a_workload() -> None:
    scenario = validate_scenario(_scenario({"dataset": DATASET_ID}))
    spec = scenario.workload.dataset
    assert spec is not None and spec.sample == "dataset" and not spec.replacement
    assert spec.describe() == f"dataset {DATASET_ID}"
    hub = DatasetWorkload(hub="acme/chats", revision="v1", split="train")
    assert hub.describe() == "hub dataset acme/chats@v1"


@pytest.mark.parametrize(
    ("dataset", "workload", "path", "words"),
    [
        ({}, {}, "workload.dataset", "exactly one of path"),
        ({"path": "a.json", "dataset": DATASET_ID}, {}, "workload.dataset", "exactly one"),
        ({"path": "a.json", "split": "train"}, {}, "workload.dataset", "go with hub"),
        ({"dataset": DATASET_ID, "format": "csv"}, {}, "workload.dataset", "when it was uploaded"),
        ({"dataset": DATASET_ID, "sample": "mix"}, {}, "workload", "give a mix"),
        ({"dataset": DATASET_ID, "sample": "mix", "replacement": True}, {"mix": MIX},
         "workload.dataset", "replacement goes with"),
        ({"dataset": DATASET_ID}, {"prompts": {"dataset": DATASET_ID}}, "workload", "not both"),
        ({"hub": "../etc"}, {}, "workload.dataset.hub", "pattern"),
        ({"path": "a.csv", "format": "xlsx"}, {}, "workload.dataset.format", "Input should be"),
        ({"path": "a", "filters": {"max_prompt_tokens": MAX_TOKENS + 1}}, {},
         "workload.dataset.filters.max_prompt_tokens", "less than or equal"),
        ({"path": "a", "filters": {"min_output_tokens": 9, "max_output_tokens": 3}}, {},
         "workload.dataset.filters", "must not exceed"),
        ({"path": "a", "columns": {"prompt": "q", "messages": "m"}}, {},
         "workload.dataset.columns", "not both"),
        ({"path": "a", "columns": {"prompt": "x" * 257}}, {},
         "workload.dataset.columns.prompt", "at most 256"),
    ],
)  # fmt: skip
def test_bad_datasets_are_refused_at_their_field(
    dataset: dict[str, Any], workload: dict[str, Any], path: str, words: str
) -> None:
    problems = _problems(_scenario(dataset, **workload))
    assert any(p == path and words in m for p, m in problems), problems


def test_replay_excludes_a_dataset() -> None:
    data = _scenario({"dataset": DATASET_ID}, replay={"dataset": DATASET_ID})
    data["load"] = {}
    assert any("drop mix, prompts and dataset" in m for _, m in _problems(data))


def test_columns_and_filters_helpers() -> None:
    assert DatasetColumns(prompt="q", output_tokens="n").mapping() == {
        "prompt": "q",
        "output_tokens": "n",
    }
    assert LengthFilters(max_output_tokens=5).on_output
    assert not LengthFilters(min_prompt_tokens=5).on_output
