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
workers (``scenarios.wire.contract.dataset_key``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any

import duckdb

from analytics.datasets.process import convert_in_child
from analytics.sql.results import first_row
from scenarios.datasets.files import DatasetSummary, WorkloadFileError, inspect_dataset
from scenarios.datasets.formats import Conversion, is_entry_jsonl
from scenarios.errors import NotFound
from scenarios.loader import Problem
from scenarios.tokenizers.files import TokenizerUnavailable, looks_like_tokenizer, tokenizers_module
from scenarios.tokenizers.probe import check_tokenizer
from scenarios.workload.spec import Workload

__all__ = [
    "DatasetInfo",
    "DatasetStore",
    "UnknownDatasetError",
    "content_id",
    "dataset_problems",
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
    # Where the entries came from (schema v14; NULL for datasets stored before): the
    # SHA-256 of the bytes that were read, what they were ("parquet/sharegpt", "jsonl"),
    # the conversion's canonical JSON (None: stored as uploaded), its rows, the rows
    # skipped by reason, and the entries without an answer length.
    source_sha256: str | None = None
    source_format: str | None = None
    conversion: str | None = None
    source_rows: int | None = None
    skipped: dict[str, int] = field(default_factory=dict)
    unanswered: int = 0
    origin: str | None = None

    def fingerprint(self) -> dict[str, Any]:
        """What makes the entries what they are: with a run's seed and its
        ``workload.dataset`` parameters, all a rerun needs to send the same requests."""
        return {
            "dataset_id": self.dataset_id,
            "origin": self.origin,
            "source_sha256": self.source_sha256,
            "source_format": self.source_format,
            "conversion": None if self.conversion is None else json.loads(self.conversion),
            "source_rows": self.source_rows,
            "entries": self.entries,
            "skipped_rows": dict(self.skipped),
        }


# Largest converted dataset when the caller gives no cap (the dataset byte cap's default).
DEFAULT_MAX_BYTES = 64 * 1024 * 1024


def content_id(content: bytes) -> str:
    """The id of a dataset with these bytes."""
    return "ds-" + hashlib.sha256(content).hexdigest()


def workload_datasets(workload: Workload) -> list[tuple[str, str]]:
    """``(use, dataset id)`` of every dataset a workload names (use: prompts, replay,
    tokenizer)."""
    refs = [
        ("prompts", workload.prompts),
        ("replay", workload.replay),
        ("dataset", workload.dataset),
    ]
    found = [(use, ref.dataset) for use, ref in refs if ref is not None and ref.dataset]
    if workload.tokenizer is not None and workload.tokenizer.dataset is not None:
        found.append(("tokenizer", workload.tokenizer.dataset))
    return found


def dataset_problems(workload: Workload, info: DatasetInfo, where: str) -> list[Problem]:
    """Why dataset ``info`` cannot serve ``workload.dataset`` (at field ``where``): not a
    prompt dataset, or rows without an answer length and no mix to give them one."""
    spec = workload.dataset
    assert spec is not None
    if "prompts" not in info.kinds:
        message = f"dataset {info.dataset_id} holds no prompts (it is: {', '.join(info.kinds)})"
        return [Problem(where, message)]
    if info.unanswered and not workload.mix and not spec.filters.on_output:
        message = (
            f"{info.unanswered} of the dataset's {info.entries} rows have no answer length "
            "(no answer turn, no output_tokens column): give workload.mix for their answer "
            "lengths, or filters.min_output_tokens to drop them"
        )
        return [Problem("workload.mix", message)]
    return []


TOKENIZER_KIND = "tokenizer"


def inspect_content(content: bytes, max_lines: int, source: str = "") -> DatasetSummary:
    """What ``content`` is good for: a tokenizer.json (checked when the tokenizers library
    is installed here: loaded and made to encode a probe within a time limit,
    ``scenarios/tokenizers/probe.py``), else JSONL prompts or a traffic log."""
    if not looks_like_tokenizer(content):
        return inspect_dataset(content, max_lines, source)
    try:
        tokenizers_module()
    except TokenizerUnavailable:
        return DatasetSummary(0, None, None, kinds_override=(TOKENIZER_KIND,))  # shape only
    try:
        # Loaded and made to encode a probe in a child process under a time limit: a
        # regex that backtracks catastrophically is refused here, not found by a shard.
        vocab = check_tokenizer(content, source or "upload")
    except TokenizerUnavailable as exc:
        raise WorkloadFileError(str(exc)) from None
    return DatasetSummary(vocab, None, None, kinds_override=(TOKENIZER_KIND,))


_COLUMNS = (
    "dataset_id, bytes, entries, kinds, replay_problem, created_at, source_sha256, "
    "source_format, conversion, source_rows, skipped_rows, unanswered, origin"
)


def _info(row: Any) -> DatasetInfo:
    return DatasetInfo(
        dataset_id=str(row[0]),
        bytes=int(row[1]),
        entries=int(row[2]),
        kinds=tuple(str(kind) for kind in row[3] or ()),
        replay_problem=row[4],
        created_at=row[5],
        source_sha256=row[6],
        source_format=row[7],
        conversion=row[8],
        source_rows=None if row[9] is None else int(row[9]),
        skipped={str(k): int(v) for k, v in json.loads(row[10] or "{}").items()},
        unanswered=int(row[11] or 0),
        origin=row[12],
    )


@dataclass(frozen=True, slots=True)
class _Prepared:
    """Bytes to store and where they came from."""

    content: bytes
    summary: DatasetSummary
    source_sha256: str
    source_format: str | None = None
    conversion: str | None = None
    source_rows: int | None = None
    skipped: dict[str, int] = field(default_factory=dict)
    origin: str | None = None


class DatasetStore:
    """Store, list and read datasets through one DuckDB connection (or cursor)."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def add(
        self,
        content: bytes,
        max_lines: int,
        source: str = "",
        conversion: Conversion | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
        origin: str | None = None,
    ) -> tuple[DatasetInfo, bool]:
        """Validate and store ``content``; returns its metadata and whether it is new
        (False: the same bytes, with the same conversion, were stored before). JSONL
        prompts, traffic logs and tokenizer.json files are stored as they are; any other
        dataset file (ShareGPT JSON, CSV, Parquet, Arrow, or a file with ``conversion``
        columns) is converted into JSONL entries first, in a process of bounded memory
        and time, and the entries are stored (``scenarios/datasets/formats.py``). A bad
        dataset raises ``WorkloadFileError`` naming the line or row (and ``source``);
        nothing is stored then. ``origin`` (a file name, ``hub:owner/name@commit``) is
        kept with a new dataset for its fingerprint."""
        conversion = conversion or Conversion()
        source_sha = hashlib.sha256(content).hexdigest()
        as_is = looks_like_tokenizer(content) or is_entry_jsonl(content, conversion)
        existing = (
            self.find(content_id(content)) if as_is else self._converted(source_sha, conversion)
        )
        if existing is not None:
            return existing, False
        prepared = (
            _Prepared(
                content,
                inspect_content(content, max_lines, source),
                source_sha,
                None if looks_like_tokenizer(content) else "jsonl",
            )
            if as_is
            else _convert(content, conversion, max_lines, max_bytes, source, source_sha)
        )
        return self._insert(replace(prepared, origin=origin))

    def _converted(self, source_sha: str, conversion: Conversion) -> DatasetInfo | None:
        row = first_row(
            self.con.execute(
                f"SELECT {_COLUMNS} FROM datasets WHERE source_sha256 = ? AND conversion = ? "  # noqa: S608 - a constant column list
                "ORDER BY created_at LIMIT 1",
                [source_sha, conversion.key()],
            )
        )
        return None if row is None else _info(row)

    def _insert(self, prepared: _Prepared) -> tuple[DatasetInfo, bool]:
        content, summary = prepared.content, prepared.summary
        dataset_id = content_id(content)
        existing = self.find(dataset_id)
        if existing is not None:
            return existing, False
        try:
            row = first_row(
                self.con.execute(
                    "INSERT INTO datasets (dataset_id, bytes, entries, kinds, replay_problem, "
                    "replay_times, created_at, content, source_sha256, source_format, conversion, "
                    "source_rows, skipped_rows, unanswered, origin) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    [
                        dataset_id,
                        len(content),
                        summary.entries,
                        list(summary.kinds),
                        summary.replay_problem,
                        None if summary.replay_times is None else list(summary.replay_times),
                        dt.datetime.now(dt.UTC),
                        content,
                        prepared.source_sha256,
                        prepared.source_format,
                        prepared.conversion,
                        prepared.source_rows,
                        json.dumps(prepared.skipped),
                        summary.unanswered,
                        prepared.origin,
                    ],
                )
            )
        except duckdb.TransactionException:
            # The same bytes stored at the same moment by another upload.
            return self.get(dataset_id), False
        return self.get(dataset_id), bool(row and row[0])

    def find(self, dataset_id: str) -> DatasetInfo | None:
        """The dataset's metadata, or None."""
        row = first_row(
            self.con.execute(
                f"SELECT {_COLUMNS} FROM datasets WHERE dataset_id = ?",  # noqa: S608 - constant columns
                [dataset_id],
            )
        )
        return None if row is None else _info(row)

    def get(self, dataset_id: str) -> DatasetInfo:
        """The dataset's metadata (UnknownDatasetError if absent)."""
        info = self.find(dataset_id)
        if info is None:
            raise UnknownDatasetError(dataset_id)
        return info

    def list_all(self, where: tuple[str, list[object]] = ("TRUE", [])) -> list[DatasetInfo]:
        """Every dataset's metadata (of those ``where``, a trusted SQL condition on
        ``datasets.dataset_id`` and its parameters, holds for), newest first."""
        condition, params = where
        rows = self.con.execute(
            f"SELECT {_COLUMNS} FROM datasets WHERE {condition} "  # noqa: S608
            "ORDER BY created_at DESC, dataset_id",
            params,
        ).fetchall()
        return [_info(row) for row in rows]

    def delete(self, dataset_id: str) -> None:
        """Remove the dataset (UnknownDatasetError if absent). Runs that used it keep
        their records; a scenario naming it is refused from now on."""
        self.get(dataset_id)
        self.con.execute("DELETE FROM datasets WHERE dataset_id = ?", [dataset_id])

    def content(self, dataset_id: str) -> bytes:
        """The dataset's bytes (UnknownDatasetError if absent)."""
        row = first_row(
            self.con.execute("SELECT content FROM datasets WHERE dataset_id = ?", [dataset_id])
        )
        if row is None:
            raise UnknownDatasetError(dataset_id)
        return bytes(row[0])

    def replay_span(self, dataset_id: str, limit: int | None = None) -> tuple[int, float]:
        """``(requests, seconds)`` a replay of the dataset sends and lasts (before its
        time scale), of its first ``limit`` entries when given; ``(0, 0.0)`` for a
        dataset that is absent or cannot be replayed."""
        row = first_row(
            self.con.execute(
                "SELECT n, replay_times[n] - replay_times[1] FROM ("
                "  SELECT least(len(replay_times), coalesce(?, len(replay_times))) AS n, "
                "replay_times"
                "  FROM datasets WHERE dataset_id = ? AND replay_times IS NOT NULL)",
                [limit, dataset_id],
            )
        )
        return (0, 0.0) if row is None else (int(row[0]), float(row[1]))

    def replay_times(self, dataset_id: str) -> list[float]:
        """The timestamps of a replayable dataset, in order (UnknownDatasetError if it is
        absent, ValueError if it cannot be replayed)."""
        row = first_row(
            self.con.execute(
                "SELECT replay_times, replay_problem FROM datasets WHERE dataset_id = ?",
                [dataset_id],
            )
        )
        if row is None:
            raise UnknownDatasetError(dataset_id)
        if row[0] is None:
            raise ValueError(f"dataset {dataset_id} cannot be replayed: {row[1]}")
        return [float(t) for t in row[0]]


def _convert(
    content: bytes,
    conversion: Conversion,
    max_lines: int,
    max_bytes: int,
    source: str,
    source_sha: str,
) -> _Prepared:
    """A dataset file converted into entries (in a child process), with its provenance."""
    try:
        converted = convert_in_child(content, conversion, max_lines, max_bytes, source)
    except WorkloadFileError as exc:
        raise WorkloadFileError(exc.reason, source or None, exc.line) from None
    return _Prepared(
        converted.content,
        inspect_dataset(converted.content, max_lines, source),
        source_sha,
        converted.source_format,
        conversion.key(),
        converted.source_rows,
        converted.skipped,
    )
