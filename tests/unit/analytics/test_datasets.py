"""Datasets: the content-addressed store, scenario references, and the REST rule that a
path is never looked at."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from analytics.datasets import DatasetStore, UnknownDatasetError, content_id, workload_datasets
from analytics.db import connect
from api.cli.datasets import local_files, store_local_datasets, with_datasets
from api.control.planner import plan_run
from api.rest.validation import PATH_REFUSED, check_scenario_datasets
from scenarios.loader import ScenarioError, validate_scenario
from scenarios.model import Scenario
from scenarios.settings import ApiSettings
from scenarios.workload_files import WorkloadFileError
from tests.support.builders import PROMPTS, TRAFFIC
from tests.support.tiny_tokenizer import train_bpe

# --------------------------------------------------------------------------- store


@pytest.fixture
def store(tmp_path: Path) -> DatasetStore:
    return DatasetStore(connect(tmp_path / "d.duckdb"))


def test_store_is_content_addressed(store: DatasetStore) -> None:
    first, created = store.add(TRAFFIC, 100)
    assert created and first.dataset_id == content_id(TRAFFIC)
    assert first.dataset_id.startswith("ds-") and len(first.dataset_id) == 3 + 64
    again, created_again = store.add(TRAFFIC, 100)
    assert not created_again and again == first
    assert store.content(first.dataset_id) == TRAFFIC
    assert store.replay_times(first.dataset_id) == [10.0, 12.0, 14.0]
    prompts, _ = store.add(PROMPTS, 100)
    assert [d.dataset_id for d in store.list_all()] == [prompts.dataset_id, first.dataset_id]
    with pytest.raises(ValueError, match="cannot be replayed"):
        store.replay_times(prompts.dataset_id)
    with pytest.raises(UnknownDatasetError):
        store.content("ds-" + "0" * 64)


def test_nothing_is_stored_for_an_invalid_dataset(store: DatasetStore) -> None:
    with pytest.raises(WorkloadFileError):
        store.add(b"not json\n", 100)
    assert store.list_all() == []


# --------------------------------------------------------------------------- scenarios


def _scenario(workload: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "ds",
        "providers": [{"name": "sim", "kind": "simulated"}],
        "workload": workload,
        "load": {} if "replay" in workload else {"concurrency": [1], "requests_per_level": 3},
    }
    return data


MIX = [
    {"prompt_tokens": {"dist": "fixed", "value": 1}, "output_tokens": {"dist": "fixed", "value": 1}}
]


def test_a_reference_is_exactly_one_of_path_and_dataset() -> None:
    for replay in ({}, {"path": "t.jsonl", "dataset": "ds-" + "a" * 64}):
        with pytest.raises(ScenarioError) as caught:
            validate_scenario(_scenario({"replay": replay}))
        assert [p.path for p in caught.value.problems] == ["workload.replay"]
        assert "exactly one of path" in caught.value.problems[0].message
    with pytest.raises(ScenarioError) as caught:
        validate_scenario(_scenario({"replay": {"dataset": "../../etc/passwd"}}))
    assert [p.path for p in caught.value.problems] == ["workload.replay.dataset"]


def test_rest_check_never_looks_at_a_path(store: DatasetStore, tmp_path: Path) -> None:
    fifo = tmp_path / "f.fifo"
    os.mkfifo(fifo)
    messages = set()
    for path in ("/etc/passwd", str(fifo), str(tmp_path), "/nonexistent/x.jsonl"):
        scenario = validate_scenario(_scenario({"replay": {"path": path}}))
        with pytest.raises(ScenarioError) as caught:
            check_scenario_datasets(scenario, store)
        problems = caught.value.problems
        assert [p.path for p in problems] == ["workload.replay.path"]
        messages.add(problems[0].message)
    assert messages == {PATH_REFUSED}


def test_rest_check_of_dataset_references(store: DatasetStore) -> None:
    prompts, _ = store.add(PROMPTS, 100)
    traffic, _ = store.add(TRAFFIC, 100)
    ok = validate_scenario(_scenario({"replay": {"dataset": traffic.dataset_id}}))
    check_scenario_datasets(ok, store)
    ok = validate_scenario(_scenario({"mix": MIX, "prompts": {"dataset": traffic.dataset_id}}))
    check_scenario_datasets(ok, store)  # a traffic log is valid as prompts too
    for workload, field in (
        ({"replay": {"dataset": prompts.dataset_id}}, "workload.replay.dataset"),
        ({"replay": {"dataset": "ds-" + "0" * 64}}, "workload.replay.dataset"),
        ({"mix": MIX, "prompts": {"dataset": "ds-" + "0" * 64}}, "workload.prompts.dataset"),
    ):
        with pytest.raises(ScenarioError) as caught:
            check_scenario_datasets(validate_scenario(_scenario(workload)), store)
        assert [p.path for p in caught.value.problems] == [field]


def test_a_replay_is_bounded_by_what_its_dataset_holds(store: DatasetStore) -> None:
    # Two lines eleven days apart: at time_scale 1 that is longer than a stage may last.
    log = (
        b'{"timestamp": 0, "prompt": "a", "max_tokens": 1}\n'
        b'{"timestamp": 950400, "prompt": "b", "max_tokens": 1}\n'
    )
    dataset, _ = store.add(log, 10)
    assert store.replay_span(dataset.dataset_id) == (2, 950400.0)
    assert store.replay_span(dataset.dataset_id, 1) == (1, 0.0)
    too_long = validate_scenario(_scenario({"replay": {"dataset": dataset.dataset_id}}))
    with pytest.raises(ScenarioError) as caught:
        check_scenario_datasets(too_long, store)
    assert [p.path for p in caught.value.problems] == ["workload.replay.time_scale"]
    for fixed in (
        {"replay": {"dataset": dataset.dataset_id, "time_scale": 0.5}},
        {"replay": {"dataset": dataset.dataset_id}, "load": {"duration_s": 60}},
        {"replay": {"dataset": dataset.dataset_id}, "load": {"requests_per_level": 1}},
    ):
        data = _scenario({"replay": fixed["replay"]})
        data["load"] = fixed.get("load", {})
        check_scenario_datasets(validate_scenario(data), store)


def test_local_files_become_dataset_references(store: DatasetStore, tmp_path: Path) -> None:
    log = tmp_path / "traffic.jsonl"
    log.write_bytes(TRAFFIC)
    scenario = validate_scenario(_scenario({"replay": {"path": str(log), "time_scale": 0.5}}))
    assert local_files(scenario) == {"replay": str(log)}
    stored = store_local_datasets(scenario, store, ApiSettings())
    assert stored.workload.replay is not None
    assert stored.workload.replay.dataset == content_id(TRAFFIC)
    assert stored.workload.replay.path is None and stored.workload.replay.time_scale == 0.5
    assert workload_datasets(stored.workload) == [("replay", content_id(TRAFFIC))]
    assert local_files(stored) == {}
    assert with_datasets(stored, {}) is stored


def test_a_local_prompt_file_that_cannot_be_replayed_names_its_field(
    store: DatasetStore, tmp_path: Path
) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_bytes(PROMPTS)
    scenario = validate_scenario(_scenario({"replay": {"path": str(path)}}))
    with pytest.raises(ScenarioError) as caught:
        store_local_datasets(scenario, store, ApiSettings())
    assert [p.path for p in caught.value.problems] == ["workload.replay.path"]
    assert "cannot be replayed" in caught.value.problems[0].message
    fifo = tmp_path / "f.fifo"
    os.mkfifo(fifo)
    scenario = validate_scenario(_scenario({"mix": MIX, "prompts": {"path": str(fifo)}}))
    with pytest.raises(ScenarioError, match="not a regular file"):
        store_local_datasets(scenario, store, ApiSettings())


def test_a_replay_is_planned_from_the_stored_times(store: DatasetStore) -> None:
    traffic, _ = store.add(TRAFFIC, 100)
    scenario = Scenario.model_validate(
        _scenario({"replay": {"dataset": traffic.dataset_id, "time_scale": 2.0}})
    )
    stages = plan_run("r", scenario, replay_times=store.replay_times(traffic.dataset_id))
    assert len(stages) == 1
    shard = stages[0].shards[0]
    assert shard.requests == 3
    assert shard.rate is not None and shard.rate.replay
    assert shard.rate.rps == pytest.approx(2 / 8.0)  # 3 arrivals over (14 - 10) s × 2
    with pytest.raises(ValueError, match="timestamps"):
        plan_run("r", scenario)


# --------------------------------------------------------------------------- tokenizers


def test_a_tokenizer_json_is_a_dataset_of_its_own_kind(store: DatasetStore, tmp_path: Path) -> None:
    content = train_bpe(tmp_path / "tokenizer.json").read_bytes()
    info, created = store.add(content, 10)  # a pretty-printed file: not held to the line cap
    assert created and info.kinds == ("tokenizer",) and info.entries > 256
    assert workload_datasets(
        validate_scenario(
            _scenario({"mix": MIX, "tokenizer": {"dataset": info.dataset_id}})
        ).workload
    ) == [("tokenizer", info.dataset_id)]
    broken = content.replace(b'"model"', b'"model": {"type": "BPE", "vocab": 3}, "x"', 1)
    with pytest.raises(WorkloadFileError, match="not a tokenizer"):
        store.add(broken, 10)


def test_rest_check_of_tokenizers(store: DatasetStore, tmp_path: Path) -> None:
    tokenizer, _ = store.add(train_bpe(tmp_path / "tokenizer.json").read_bytes(), 10)
    prompts, _ = store.add(PROMPTS, 100)
    for workload in (
        {"mix": MIX, "tokenizer": "meta-llama/Llama-3.1-8B-Instruct"},  # resolved by workers
        {"mix": MIX, "tokenizer": {"dataset": tokenizer.dataset_id}},
    ):
        check_scenario_datasets(validate_scenario(_scenario(workload)), store)
    for workload, field in (
        ({"mix": MIX, "tokenizer": {"path": "/etc/passwd"}}, "workload.tokenizer.path"),
        ({"mix": MIX, "tokenizer": {"dataset": prompts.dataset_id}}, "workload.tokenizer.dataset"),
        ({"mix": MIX, "prompts": {"dataset": tokenizer.dataset_id}}, "workload.prompts.dataset"),
    ):
        with pytest.raises(ScenarioError) as caught:
            check_scenario_datasets(validate_scenario(_scenario(workload)), store)
        assert [p.path for p in caught.value.problems] == [field]
    simulated = _scenario({"mix": MIX})
    simulated["providers"] = [
        {"name": "sim", "kind": "simulated", "simulate": {"prompt_tokenizer": {"path": "/x"}}}
    ]
    with pytest.raises(ScenarioError) as caught:
        check_scenario_datasets(validate_scenario(simulated), store)
    assert [p.path for p in caught.value.problems] == ["providers.0.simulate.prompt_tokenizer.path"]


def test_a_local_tokenizer_directory_becomes_a_dataset(store: DatasetStore, tmp_path: Path) -> None:
    train_bpe(tmp_path / "tokenizer.json")
    scenario = validate_scenario(_scenario({"mix": MIX, "tokenizer": {"path": str(tmp_path)}}))
    stored = store_local_datasets(scenario, store, ApiSettings())
    ref = stored.workload.tokenizer
    assert ref is not None and ref.path is None and ref.dataset is not None
    assert store.get(ref.dataset).kinds == ("tokenizer",)
    empty = tmp_path / "empty"
    empty.mkdir()
    scenario = validate_scenario(_scenario({"mix": MIX, "tokenizer": {"path": str(empty)}}))
    with pytest.raises(ScenarioError) as caught:
        store_local_datasets(scenario, store, ApiSettings())
    assert [p.path for p in caught.value.problems] == ["workload.tokenizer.path"]
