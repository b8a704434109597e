"""Uploaded datasets: JSONL prompt files, traffic logs and tokenizers, stored by content
in DuckDB.

A ``tokenizer.json`` (one JSON object with a tokenizer ``model``) is a dataset of kind
``tokenizer`` (its ``entries`` are its vocabulary size), named by
``workload.tokenizer.dataset`` (docs/lengths.md).

A dataset's id is ``ds-`` and the hex SHA-256 of its bytes, so uploading the same bytes
again answers the same id, and an id always means the same content. A dataset is
validated once, when stored (``workers.load.files.inspect_dataset``): it is valid for
``prompts`` whenever it parses, and for ``replay`` when every line also has a timestamp
and ``max_tokens``; the replay timestamps are kept, in order, so that planning a replay
reads no content at all. Scenarios name datasets by id (``workload.prompts.dataset``,
``workload.replay.dataset``); the control plane copies the bytes into Redis for the
workers (``scenarios.wire.dataset_key``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass
from typing import Any

import duckdb

from scenarios.errors import NotFound
from scenarios.model import Workload
from scenarios.tokenizer_files import (
    TokenizerUnavailable,
    looks_like_tokenizer,
    tokenizer_from_bytes,
    tokenizers_module,
)
from scenarios.workload_files import DatasetSummary, WorkloadFileError, inspect_dataset

__all__ = [
    "DatasetInfo",
    "DatasetStore",
    "UnknownDatasetError",
    "content_id",
    "workload_datasets",
]


class UnknownDatasetError(NotFound, LookupError):
    """No dataset with that id is stored."""

    def __init__(self, dataset_id: str) -> None:
        super().__init__(f"no dataset {dataset_id!r}")
        self.dataset_id = dataset_id


@dataclass(frozen=True, slots=True)
class DatasetInfo:
    """A stored dataset's metadata."""

    dataset_id: str
    bytes: int
    entries: int
    kinds: tuple[str, ...]
    replay_problem: str | None
    created_at: dt.datetime


def content_id(content: bytes) -> str:
    """The id of a dataset with these bytes."""
    return "ds-" + hashlib.sha256(content).hexdigest()


def workload_datasets(workload: Workload) -> list[tuple[str, str]]:
    """``(use, dataset id)`` of every dataset a workload names (use: prompts, replay,
    tokenizer)."""
    refs = [("prompts", workload.prompts), ("replay", workload.replay)]
    found = [(use, ref.dataset) for use, ref in refs if ref is not None and ref.dataset]
    if workload.tokenizer is not None and workload.tokenizer.dataset is not None:
        found.append(("tokenizer", workload.tokenizer.dataset))
    return found


TOKENIZER_KIND = "tokenizer"


def inspect_content(content: bytes, max_lines: int, source: str = "") -> DatasetSummary:
    """What ``content`` is good for: a tokenizer.json (checked by loading it when the
    tokenizers library is installed here), else JSONL prompts or a traffic log."""
    if not looks_like_tokenizer(content):
        return inspect_dataset(content, max_lines, source)
    try:
        tokenizers_module()
    except TokenizerUnavailable:
        return DatasetSummary(0, None, None, kinds_override=(TOKENIZER_KIND,))  # shape only
    try:
        vocab = tokenizer_from_bytes(content, source or "upload").get_vocab_size()
    except TokenizerUnavailable as exc:
        raise WorkloadFileError(str(exc)) from None
    return DatasetSummary(vocab, None, None, kinds_override=(TOKENIZER_KIND,))


def _info(row: Any) -> DatasetInfo:
    return DatasetInfo(
        dataset_id=str(row[0]),
        bytes=int(row[1]),
        entries=int(row[2]),
        kinds=tuple(str(kind) for kind in row[3] or ()),
        replay_problem=row[4],
        created_at=row[5],
    )


class DatasetStore:
    """Store, list and read datasets through one DuckDB connection (or cursor)."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def add(self, content: bytes, max_lines: int, source: str = "") -> tuple[DatasetInfo, bool]:
        """Validate and store ``content``; returns its metadata and whether it is new
        (False: the same bytes were stored before). A bad dataset raises
        ``WorkloadFileError`` naming the line (and ``source``); nothing is stored then."""
        dataset_id = content_id(content)
        existing = self.find(dataset_id)
        if existing is not None:
            return existing, False
        summary = inspect_content(content, max_lines, source)
        try:
            row = self.con.execute(
                "INSERT INTO datasets VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                [
                    dataset_id,
                    len(content),
                    summary.entries,
                    list(summary.kinds),
                    summary.replay_problem,
                    None if summary.replay_times is None else list(summary.replay_times),
                    dt.datetime.now(dt.UTC),
                    content,
                ],
            ).fetchone()
        except duckdb.TransactionException:
            # The same bytes stored at the same moment by another upload.
            return self.get(dataset_id), False
        return self.get(dataset_id), bool(row and row[0])

    def find(self, dataset_id: str) -> DatasetInfo | None:
        """The dataset's metadata, or None."""
        row = self.con.execute(
            "SELECT dataset_id, bytes, entries, kinds, replay_problem, created_at "
            "FROM datasets WHERE dataset_id = ?",
            [dataset_id],
        ).fetchone()
        return None if row is None else _info(row)

    def get(self, dataset_id: str) -> DatasetInfo:
        """The dataset's metadata (UnknownDatasetError if absent)."""
        info = self.find(dataset_id)
        if info is None:
            raise UnknownDatasetError(dataset_id)
        return info

    def list_all(self) -> list[DatasetInfo]:
        """Every dataset's metadata, newest first."""
        rows = self.con.execute(
            "SELECT dataset_id, bytes, entries, kinds, replay_problem, created_at "
            "FROM datasets ORDER BY created_at DESC, dataset_id"
        ).fetchall()
        return [_info(row) for row in rows]

    def content(self, dataset_id: str) -> bytes:
        """The dataset's bytes (UnknownDatasetError if absent)."""
        row = self.con.execute(
            "SELECT content FROM datasets WHERE dataset_id = ?", [dataset_id]
        ).fetchone()
        if row is None:
            raise UnknownDatasetError(dataset_id)
        return bytes(row[0])

    def replay_span(self, dataset_id: str, limit: int | None = None) -> tuple[int, float]:
        """``(requests, seconds)`` a replay of the dataset sends and lasts (before its
        time scale), of its first ``limit`` entries when given; ``(0, 0.0)`` for a
        dataset that is absent or cannot be replayed."""
        row = self.con.execute(
            "SELECT n, replay_times[n] - replay_times[1] FROM ("
            "  SELECT least(len(replay_times), coalesce(?, len(replay_times))) AS n, replay_times"
            "  FROM datasets WHERE dataset_id = ? AND replay_times IS NOT NULL)",
            [limit, dataset_id],
        ).fetchone()
        return (0, 0.0) if row is None else (int(row[0]), float(row[1]))

    def replay_times(self, dataset_id: str) -> list[float]:
        """The timestamps of a replayable dataset, in order (UnknownDatasetError if it is
        absent, ValueError if it cannot be replayed)."""
        row = self.con.execute(
            "SELECT replay_times, replay_problem FROM datasets WHERE dataset_id = ?",
            [dataset_id],
        ).fetchone()
        if row is None:
            raise UnknownDatasetError(dataset_id)
        if row[0] is None:
            raise ValueError(f"dataset {dataset_id} cannot be replayed: {row[1]}")
        return [float(t) for t in row[0]]
