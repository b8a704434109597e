"""The local user's dataset sources: a file, a directory of data files, and a Hugging
Face hub dataset resolved from a cache laid out on disk (offline: nothing is fetched)."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pytest

from api.cli.dataset_files import hub_snapshot, read_dataset_source
from scenarios.datasets.files import WorkloadFileError
from scenarios.datasets.spec import DatasetWorkload
from tests.support.dataset_files import (
    HUB_COMMIT,
    chat_jsonl,
    hub_cache,
    parquet_bytes,
    prompts_table,
)


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty Hugging Face cache, and the hub out of reach."""
    cache = tmp_path / "hf"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


def test_a_file_is_read_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_bytes(chat_jsonl(3))
    blob = read_dataset_source(DatasetWorkload(path=str(path)), 1 << 20)
    assert (blob.data, blob.name, blob.origin) == (chat_jsonl(3), "chat.jsonl", str(path))
    with pytest.raises(WorkloadFileError, match="more than"):
        read_dataset_source(DatasetWorkload(path=str(path)), 10)


def test_a_directory_of_tables_is_one_arrow_stream_in_file_order(tmp_path: Path) -> None:
    table = prompts_table(10)
    (tmp_path / "part-1.parquet").write_bytes(parquet_bytes(table.slice(5)))
    (tmp_path / "part-0.parquet").write_bytes(parquet_bytes(table.slice(0, 5)))
    (tmp_path / "dataset_info.json").write_text("{}")
    blob = read_dataset_source(DatasetWorkload(path=str(tmp_path)), 1 << 20)
    combined = pa.ipc.open_stream(io.BytesIO(blob.data)).read_all()
    assert combined["question"].to_pylist() == table["question"].to_pylist()
    (tmp_path / "extra.csv").write_text("a\n1\n")
    with pytest.raises(WorkloadFileError, match="give one file"):
        read_dataset_source(DatasetWorkload(path=str(tmp_path)), 1 << 20)


def test_jsonl_files_are_concatenated(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(chat_jsonl(2, seed=1).rstrip(b"\n"))
    (tmp_path / "b.jsonl").write_bytes(chat_jsonl(2, seed=2))
    blob = read_dataset_source(DatasetWorkload(path=str(tmp_path)), 1 << 20)
    assert blob.data == chat_jsonl(2, seed=1) + chat_jsonl(2, seed=2)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(WorkloadFileError, match="no data files"):
        read_dataset_source(DatasetWorkload(path=str(empty)), 1 << 20)


def test_a_hub_dataset_comes_from_the_cache(offline: Path) -> None:
    files = {
        "data/train-00000-of-00001.jsonl": chat_jsonl(4),
        "data/test-00000-of-00001.jsonl": chat_jsonl(2, seed=9),
        "README.md": b"# chats",
    }
    hub_cache(offline, "acme/chats", files)
    root, commit = hub_snapshot("acme/chats", None, 1 << 20)
    assert commit == HUB_COMMIT and (root / "README.md").is_file()
    blob = read_dataset_source(DatasetWorkload(hub="acme/chats", split="train"), 1 << 20)
    assert blob.data == chat_jsonl(4)
    assert blob.origin == f"hub:acme/chats@{HUB_COMMIT}"
    with pytest.raises(WorkloadFileError, match="no data files of split 'validation'"):
        read_dataset_source(DatasetWorkload(hub="acme/chats", split="validation"), 1 << 20)


def test_a_hub_dataset_not_cached_is_never_fetched_offline(offline: Path) -> None:
    with pytest.raises(WorkloadFileError, match="not in this machine's Hugging Face cache"):
        read_dataset_source(DatasetWorkload(hub="acme/missing"), 1 << 20)
