"""Workload files: the bounded reader, and validation of prompt files and traffic logs."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from scenarios.datasets.files import WorkloadFileError, inspect_dataset, parse_entries, read_bounded
from tests.support.builders import PROMPTS, TRAFFIC

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


def test_replay_lines_may_name_a_session_and_a_turn() -> None:
    log = (
        b'{"timestamp": 2, "session_id": "c1", "turn": 1, "prompt": "b", "max_tokens": 4}\n'
        b'{"timestamp": 1, "session_id": 7, "turn": 0, "prompt": "a", "max_tokens": 4}\n'
        b'{"timestamp": 3, "prompt": "c", "max_tokens": 4}\n'
    )
    first, second, third = parse_entries(log, "log", replay=True)
    assert (first.session_id, first.turn) == ("7", 0)  # an integer id is kept as a string
    assert (second.session_id, second.turn) == ("c1", 1)
    assert (third.session_id, third.turn) == (None, None)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b'{"turn": 1}', "turn needs a session_id"),
        (b'{"session_id": true}', "session_id must be a string or an integer"),
        (b'{"session_id": ""}', "session_id must have 1 to 256 characters"),
        (b'{"session_id": "' + b"x" * 257 + b'"}', "session_id must have 1 to 256 characters"),
        (b'{"session_id": "a", "turn": -1}', "turn must be an integer >= 0"),
        (b'{"session_id": "a", "turn": 1.5}', "turn must be an integer >= 0"),
    ],
)
def test_bad_session_fields_name_the_line(line: bytes, reason: str) -> None:
    fields = b'"timestamp": 1, "prompt": "a", "max_tokens": 2, '
    bad = b"{" + fields + line[1:]
    with pytest.raises(WorkloadFileError) as caught:
        parse_entries(
            b'{"timestamp": 0, "prompt": "ok", "max_tokens": 1}\n' + bad, "log", replay=True
        )
    assert str(caught.value).startswith(f"log:2: {reason}")
