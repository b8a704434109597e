"""Datasets: the content-addressed store, scenario references, and the REST rule that a
path is never looked at."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from analytics.datasets.uploads import (
    DatasetStore,
    UnknownDatasetError,
    content_id,
    dataset_problems,
    workload_datasets,
)
from analytics.store.db import connect
from api.cli.datasets import local_files, store_local_datasets, with_datasets
from api.control.planner import plan_run
from api.rest.validation import PATH_REFUSED, check_scenario_datasets
from scenarios.datasets.files import WorkloadFileError
from scenarios.datasets.formats import Conversion
from scenarios.loader import ScenarioError, validate_scenario
from scenarios.model import Scenario
from scenarios.settings import ApiSettings
from tests.support.builders import PROMPTS, TRAFFIC
from tests.support.dataset_files import chat_jsonl, parquet_bytes, prompts_table, sharegpt_json
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


# --------------------------------------------------------------------------- workload.dataset


def _dataset_scenario(dataset: dict[str, Any], **workload: Any) -> Scenario:
    return validate_scenario(
        {
            "name": "ds",
            "providers": [{"name": "sim", "kind": "simulated"}],
            "workload": {"dataset": dataset, **workload},
            "load": {"concurrency": [1], "requests_per_level": 2},
        }
    )


def test_a_dataset_file_is_converted_once_and_keeps_its_provenance(store: DatasetStore) -> None:
    data = sharegpt_json(6, broken=2)
    info, created = store.add(data, 100, "chats.json", origin="chats.json")
    assert created and "prompts" in info.kinds
    assert (info.entries, info.source_rows, info.source_format) == (6, 8, "json/sharegpt")
    assert info.source_sha256 == hashlib.sha256(data).hexdigest()
    assert info.dataset_id == content_id(store.content(info.dataset_id)) != content_id(data)
    assert info.skipped == {"no user turn": 1, "empty conversation": 1}
    assert info.unanswered == 0 and info.origin == "chats.json"
    # The same file with the same conversion is found without converting it again.
    again, created_again = store.add(data, 100)
    assert not created_again and again == info
    # A mapping giving the same entries names the same dataset; another is another one.
    same = store.add(data, 100, conversion=Conversion.of("auto", {"messages": "conversations"}))
    assert same == (info, False)
    mapped = Conversion.of("json", {"prompt": "id"})
    other, created_other = store.add(data, 100, conversion=mapped)
    assert created_other and other.conversion == mapped.key() and other.entries == 8
    assert other.fingerprint()["conversion"] == {"columns": {"prompt": "id"}, "format": "json"}
    with pytest.raises(WorkloadFileError, match=r"chats.json: no row can be a prompt"):
        store.add(b'[{"conversations": []}]', 100, "chats.json")


def test_prompts_without_answers_need_a_mix(store: DatasetStore) -> None:
    info, _ = store.add(PROMPTS, 100)
    assert info.unanswered == info.entries > 0
    problems = dataset_problems(_dataset_scenario({"dataset": info.dataset_id}).workload, info, "f")
    assert [p.path for p in problems] == ["workload.mix"]
    with_filter = _dataset_scenario(
        {"dataset": info.dataset_id, "filters": {"min_output_tokens": 1}}
    )
    assert dataset_problems(with_filter.workload, info, "f") == []


def test_a_tokenizer_is_no_dataset_workload(store: DatasetStore, tmp_path: Path) -> None:
    tokenizer, _ = store.add(train_bpe(tmp_path / "tokenizer.json").read_bytes(), 10)
    with_filter = _dataset_scenario({"dataset": tokenizer.dataset_id})
    assert "holds no prompts" in dataset_problems(with_filter.workload, tokenizer, "f")[0].message


def test_rest_refuses_dataset_paths_and_hub_names_at_their_field(store: DatasetStore) -> None:
    for spec, path in (
        ({"path": "/etc/passwd"}, "workload.dataset.path"),
        ({"hub": "acme/chats"}, "workload.dataset.hub"),
        ({"dataset": "ds-" + "0" * 64}, "workload.dataset.dataset"),
    ):
        with pytest.raises(ScenarioError) as caught:
            check_scenario_datasets(_dataset_scenario(spec), store)
        assert [p.path for p in caught.value.problems] == [path]
    assert PATH_REFUSED in _refusal({"path": "/etc/passwd"}, store)
    info, _ = store.add(chat_jsonl(3), 100)
    check_scenario_datasets(_dataset_scenario({"dataset": info.dataset_id}), store)


def _refusal(spec: dict[str, Any], store: DatasetStore) -> str:
    with pytest.raises(ScenarioError) as caught:
        check_scenario_datasets(_dataset_scenario(spec), store)
    return caught.value.problems[0].message


def test_tokenbench_run_converts_the_local_file_and_names_the_dataset(
    store: DatasetStore, tmp_path: Path
) -> None:
    path = tmp_path / "questions.parquet"
    path.write_bytes(parquet_bytes(prompts_table(12)))
    spec = {
        "path": str(path),
        "columns": {"prompt": "question", "output_tokens": "answer_len"},
        "filters": {"max_prompt_tokens": 100},
    }
    scenario = store_local_datasets(_dataset_scenario(spec), store, ApiSettings())
    dataset = scenario.workload.dataset
    assert dataset is not None and dataset.path is None and dataset.columns is None
    assert dataset.filters.max_prompt_tokens == 100  # run-time parameters stay
    info = store.get(dataset.dataset or "")
    assert (info.source_format, info.entries, info.origin) == ("parquet/columns", 12, str(path))
    assert workload_datasets(scenario.workload) == [("dataset", info.dataset_id)]
    with pytest.raises(ScenarioError) as caught:
        store_local_datasets(
            _dataset_scenario({"path": str(path), "columns": {"prompt": "nope"}}),
            store,
            ApiSettings(),
        )
    assert caught.value.problems[0].path == "workload.dataset.path"
    assert "no column 'nope'" in caught.value.problems[0].message
