"""Datasets: the bounded file reader, validation on upload, the content-addressed store,
scenario references, and the REST rule that a path is never looked at."""

from __future__ import annotations

import os
import threading
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
from scenarios.workload_files import WorkloadFileError, inspect_dataset, parse_entries, read_bounded

PROMPTS = b'{"prompt": "hello"}\n# comment\n\n{"messages": [{"role": "user", "content": "hi"}]}\n'
TRAFFIC = (
    b'{"timestamp": 12.0, "prompt": "b", "max_tokens": 4}\n'
    b'{"timestamp": 10.0, "prompt": "a", "max_tokens": 2}\n'
    b'{"timestamp": 14.0, "prompt": "c", "max_tokens": 8}\n'
)


# --------------------------------------------------------------------------- bounded reader


def test_read_bounded_reads_a_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_bytes(PROMPTS)
    assert read_bounded(path, 1024) == PROMPTS


def test_read_bounded_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "never.fifo"
    os.mkfifo(fifo)
    outcome: list[BaseException | bytes] = []

    def read() -> None:
        try:
            outcome.append(read_bounded(fifo, 1024))
        except WorkloadFileError as exc:
            outcome.append(exc)

    # In a thread, so that a regression (blocking open) fails the test instead of hanging it.
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    assert not reader.is_alive(), "read_bounded blocked on a FIFO"
    assert len(outcome) == 1 and isinstance(outcome[0], WorkloadFileError)
    assert "not a regular file" in str(outcome[0])


def test_read_bounded_refuses_a_directory_a_device_and_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(WorkloadFileError, match="not a regular file"):
        read_bounded(tmp_path, 1024)
    with pytest.raises(WorkloadFileError, match="not a regular file"):
        read_bounded("/dev/zero", 1024)  # would never end
    with pytest.raises(WorkloadFileError, match="No such file"):
        read_bounded(tmp_path / "missing.jsonl", 1024)


def test_read_bounded_refuses_an_oversized_file(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    path.write_bytes(b"x" * 2049)
    with pytest.raises(WorkloadFileError, match="TOKENBENCH__API__MAX_DATASET_BYTES"):
        read_bounded(path, 2048)
    assert len(read_bounded(path, 2049)) == 2049


def test_read_bounded_follows_a_symlink_to_a_regular_file_only(tmp_path: Path) -> None:
    target = tmp_path / "p.jsonl"
    target.write_bytes(PROMPTS)
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    assert read_bounded(link, 1024) == PROMPTS
    fifo = tmp_path / "f.fifo"
    os.mkfifo(fifo)
    fifo_link = tmp_path / "fifo-link.jsonl"
    fifo_link.symlink_to(fifo)
    with pytest.raises(WorkloadFileError, match="not a regular file"):
        read_bounded(fifo_link, 1024)


# --------------------------------------------------------------------------- validation


def test_a_prompt_file_is_valid_for_prompts_only() -> None:
    summary = inspect_dataset(PROMPTS, 100)
    assert summary.entries == 2
    assert summary.kinds == ("prompts",)
    assert summary.replay_problem == "line 1: no max_tokens"


def test_a_traffic_log_is_valid_for_replay_with_sorted_times() -> None:
    summary = inspect_dataset(TRAFFIC, 100)
    assert summary.kinds == ("prompts", "replay")
    assert summary.replay_times == (10.0, 12.0, 14.0)
    entries = parse_entries(TRAFFIC, "t", replay=True)
    assert [e.messages[0][1] for e in entries] == ["a", "b", "c"]


def test_a_bad_timestamp_only_makes_a_file_unfit_for_replay() -> None:
    data = b'{"timestamp": "yesterday", "prompt": "a", "max_tokens": 2}\n'
    summary = inspect_dataset(data, 10)
    assert summary.kinds == ("prompts",)
    assert summary.replay_problem == "line 1: no valid timestamp"


@pytest.mark.parametrize(
    ("data", "line", "words"),
    [
        (b'{"prompt": "ok"}\n{"prompt": \n', 2, "line 2"),
        (b'{"prompt": "ok"}\n\n[1, 2]\n', 3, "JSON object"),
        (b'{"prompt": ""}\n', 1, "non-empty"),
        (b'{"prompt": "ok", "max_tokens": 0}\n', 1, "positive integer"),
        (b'{"prompt": "ok", "max_tokens": true}\n', 1, "positive integer"),
        (b'{"messages": [{"role": "user"}]}\n', 1, "role and content"),
        (b"\xff\xfe\n", 1, "line 1"),
    ],
)
def test_invalid_lines_are_named(data: bytes, line: int, words: str) -> None:
    with pytest.raises(WorkloadFileError) as caught:
        inspect_dataset(data, 100)
    assert caught.value.line == line
    assert words in str(caught.value)


def test_empty_datasets_and_too_many_lines_are_refused() -> None:
    with pytest.raises(WorkloadFileError, match="no entries"):
        inspect_dataset(b"\n# nothing\n", 10)
    with pytest.raises(WorkloadFileError, match="MAX_DATASET_LINES"):
        inspect_dataset(b'{"prompt": "x"}\n' * 11, 10)
    # Blank lines count: a body of newlines is refused without building millions of lines.
    with pytest.raises(WorkloadFileError, match="more than 1000 lines"):
        inspect_dataset(b"\n" * 5_000_000, 1000)


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
