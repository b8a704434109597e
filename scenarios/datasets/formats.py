"""Converting a dataset file into prompt entries, once, where its bytes are first read.

Supported files: JSON (an array of objects: ShareGPT dumps), JSONL, CSV, Parquet and
Arrow (IPC file or stream, as ``Dataset.save_to_disk`` writes). Each row becomes one line
of the JSONL entry model of ``scenarios.datasets.files``: ``{"row": N, "messages":
[...], "max_tokens": M}`` where ``row`` is the row's 0-based index in the file,
``messages`` its whole conversation (ShareGPT ``from: human|gpt`` become ``user`` and
``assistant``) and ``max_tokens`` its ``output_tokens`` column. Workers then parse one
format only. How the rows' columns are found (``columns``, or the usual names
``conversations``, ``messages``, ``prompt``, ``completion``, ``max_tokens``) is part of
the conversion; which of the kept rows a request uses is decided when requests are
planned (``workers/prompts/dataset_requests.py``).

Nothing here executes code from a file: JSON is read by orjson, tables by pyarrow's
readers, only the mapped columns are decoded, and the decoded size is checked against the
file's own metadata before a Parquet row group is read. A row that cannot be a prompt
(no user turn, images, an empty text) is skipped and counted by reason; a file that is
not what it claims is refused naming the row or line. Uploads are converted in a
process of bounded memory and time (``analytics/datasets/process.py``).
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from scenarios.datasets.files import WorkloadFileError
from scenarios.limits import (
    DATASET_DECODED_FACTOR,
    MAX_CONVERSATION_TURNS,
    MAX_DATASET_CELL_CHARS,
    MAX_DATASET_COLUMNS,
    MAX_TOKENS,
)
from scenarios.settings import env_name

__all__ = [
    "ROLES",
    "Conversion",
    "Converted",
    "convert",
    "detect_format",
    "is_entry_jsonl",
]

# Speakers of ShareGPT-style turns (``from``) and OpenAI roles, as chat roles.
ROLES: Mapping[str, str] = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "bard": "assistant",
    "bing": "assistant",
    "model": "assistant",
    "system": "system",
    "developer": "developer",
    "tool": "tool",
    "function": "tool",
    "observation": "tool",
}
# Keys looked for when no column is mapped, in order of preference.
_AUTO = {
    "messages": ("conversations", "messages", "conversation"),
    "prompt": ("prompt",),
    "answer": ("completion",),
    "output_tokens": ("max_tokens", "output_tokens"),
}
_BATCH_ROWS = 4096


@dataclass(frozen=True, slots=True)
class Conversion:
    """How a file becomes entries: its format (``auto``: from its first bytes, or a
    ``.csv`` name) and the columns holding prompt, conversation, answer, output length."""

    format: str = "auto"
    columns: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, fmt: str = "auto", columns: Mapping[str, str] | None = None) -> Conversion:
        """A conversion from a format name and a ``{role: column}`` mapping."""
        return cls(fmt, tuple(sorted((columns or {}).items())))

    def key(self) -> str:
        """Canonical JSON: with the file's hash, what makes a converted dataset unique."""
        return orjson.dumps(
            {"format": self.format, "columns": dict(self.columns)}, option=orjson.OPT_SORT_KEYS
        ).decode()

    @classmethod
    def from_key(cls, key: str) -> Conversion:
        """The conversion :meth:`key` wrote."""
        data = orjson.loads(key)
        return cls.of(str(data["format"]), {str(k): str(v) for k, v in data["columns"].items()})


@dataclass(frozen=True, slots=True)
class Converted:
    """A converted file: the entries' JSONL, what the file was, and what was skipped."""

    content: bytes
    source_format: str  # container and shape, e.g. "parquet/sharegpt"
    source_rows: int
    rows: int
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> rows


def detect_format(data: bytes, name: str = "") -> str:
    """The container of ``data``: parquet and arrow by their magic bytes, csv by a
    ``.csv``/``.tsv`` name, json for an array, jsonl for objects."""
    if data[:4] == b"PAR1":
        return "parquet"
    if data[:6] == b"ARROW1" or data[:4] == b"\xff\xff\xff\xff":
        return "arrow"
    if name.lower().endswith((".csv", ".tsv")):
        return "csv"
    head = data[:4096].lstrip()
    if head.startswith(b"["):
        return "json"
    if head.startswith(b"{"):
        return "jsonl"
    raise WorkloadFileError(
        "not a dataset format tokenbench recognises (JSON array, JSONL, Parquet, Arrow): "
        "for CSV give format: csv (upload: ?format=csv)"
    )


def is_entry_jsonl(data: bytes, conversion: Conversion) -> bool:
    """Whether ``data`` is already JSONL of the entry model (its first object has
    ``messages`` or ``prompt``, and no other column is asked for): stored as it is."""
    if conversion.columns or conversion.format not in ("auto", "jsonl"):
        return False
    for raw in data.split(b"\n", 64)[:64]:
        line = raw.strip()
        if not line or line.startswith(b"#"):
            continue
        try:
            first = orjson.loads(line)
        except orjson.JSONDecodeError:
            return False
        return (
            isinstance(first, dict)
            and ("messages" in first or "prompt" in first)
            and not any(key in first for key in ("conversations", "completion", "output_tokens"))
        )
    return False


def convert(
    data: bytes, conversion: Conversion, max_rows: int, max_bytes: int, name: str = ""
) -> Converted:
    """The entries of a dataset file (WorkloadFileError naming the row when it cannot be
    read, or when nothing in it can be a prompt)."""
    fmt = conversion.format if conversion.format != "auto" else detect_format(data, name)
    mapping = dict(conversion.columns)
    if "prompt" in mapping and "messages" in mapping:
        raise WorkloadFileError("give a prompt column or a messages column, not both")
    if mapping and "prompt" not in mapping and "messages" not in mapping:
        raise WorkloadFileError("map a prompt column or a messages column")
    records = _records(data, fmt, mapping, max_rows, max_bytes)
    out, size, kept, total = io.BytesIO(), 0, 0, 0
    skipped: Counter[str] = Counter()
    resolved: dict[str, str] | None = None
    shape = "columns" if mapping else ""
    for index, record in records:
        total += 1
        if resolved is None:
            resolved = mapping or _auto_columns(record.keys())
            shape = shape or _shape(resolved, record)
        entry = _entry(record, resolved)
        if isinstance(entry, str):
            skipped[entry] += 1
            continue
        line = orjson.dumps({"row": index, **entry}) + b"\n"
        size += len(line)
        if size > max_bytes:
            raise WorkloadFileError(
                f"converted, the dataset would be more than {max_bytes} bytes "
                f"({env_name('api.max_dataset_bytes')}): filter it before uploading"
            )
        out.write(line)
        kept += 1
    if kept == 0:
        reasons = ", ".join(f"{count} {why}" for why, count in skipped.most_common()) or "no rows"
        raise WorkloadFileError(f"no row can be a prompt ({reasons})")
    return Converted(out.getvalue(), f"{fmt}/{shape}", total, kept, dict(skipped))


# --------------------------------------------------------------------------- columns


def _auto_columns(keys: Any) -> dict[str, str]:
    names = set(keys)
    found = {}
    for role, candidates in _AUTO.items():
        for candidate in candidates:
            if candidate in names:
                found[role] = candidate
                break
    if "messages" in found:
        found.pop("prompt", None)
    if "messages" not in found and "prompt" not in found:
        shown = ", ".join(sorted(str(k) for k in names)[:20])
        raise WorkloadFileError(
            "no conversations, messages or prompt column: map yours with columns: "
            f"{{prompt: ..., messages: ...}} (the file has: {shown})"
        )
    return found


def _shape(mapping: dict[str, str], record: Mapping[str, Any]) -> str:
    if "messages" not in mapping:
        return "prompt"
    turns = record.get(mapping["messages"])
    first = turns[0] if isinstance(turns, list) and turns else None
    return "sharegpt" if isinstance(first, dict) and "from" in first else "openai"


def _entry(record: Mapping[str, Any], mapping: dict[str, str]) -> dict[str, Any] | str:
    """The entry of one row, or why the row is skipped."""
    messages = _conversation(record, mapping)
    if isinstance(messages, str):
        return messages
    answer_column = mapping.get("answer")
    if answer_column is not None:
        answer = record.get(answer_column)
        if isinstance(answer, str) and answer:
            messages.append({"role": "assistant", "content": answer})
    if not any(m["role"] == "user" for m in messages):
        return "no user turn"
    if any(len(m["content"]) > MAX_DATASET_CELL_CHARS for m in messages):
        return f"a message longer than {MAX_DATASET_CELL_CHARS} characters"
    entry: dict[str, Any] = {"messages": messages}
    output_column = mapping.get("output_tokens")
    if output_column is not None and record.get(output_column) is not None:
        tokens = _tokens(record[output_column])
        if tokens is None:
            return "bad output_tokens"
        entry["max_tokens"] = tokens
    return entry


def _conversation(record: Mapping[str, Any], mapping: dict[str, str]) -> list[dict[str, str]] | str:
    """The row's messages (its conversation, or its prompt as one user message), or why
    it has none."""
    if "messages" not in mapping:
        prompt = record.get(mapping["prompt"])
        if not isinstance(prompt, str) or not prompt.strip():
            return "empty prompt"
        return [{"role": "user", "content": prompt}]
    turns = record.get(mapping["messages"])
    if not isinstance(turns, list) or not turns:
        return "empty conversation"
    if len(turns) > MAX_CONVERSATION_TURNS:
        return f"more than {MAX_CONVERSATION_TURNS} turns"
    messages = []
    for turn in turns:
        message = _message(turn)
        if isinstance(message, str):
            return message
        messages.append(message)
    return messages


def _message(turn: object) -> dict[str, str] | str:
    if not isinstance(turn, dict):
        return "a turn that is not an object"
    speaker = turn.get("role", turn.get("from"))
    role = ROLES.get(speaker.lower()) if isinstance(speaker, str) else None
    if role is None:
        return "unknown speaker"
    content = turn.get("content", turn.get("value"))
    if content is None:
        return {"role": role, "content": ""}  # e.g. an assistant turn that only calls tools
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text":
                return "non-text content (images, audio)"
            texts.append(str(part.get("text") or ""))
        return {"role": role, "content": "\n".join(texts)}
    if not isinstance(content, str):
        return "a turn whose content is not text"
    return {"role": role, "content": content}


def _tokens(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, int) and 1 <= value <= MAX_TOKENS:
        return value
    return None


# --------------------------------------------------------------------------- readers


def _records(
    data: bytes, fmt: str, mapping: dict[str, str], max_rows: int, max_bytes: int
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(row index, record)`` of the file, lazily (tables batch by batch)."""
    if fmt == "jsonl":
        return _jsonl(data, max_rows)
    if fmt == "json":
        return _json(data, max_rows)
    if fmt in ("parquet", "arrow", "csv"):
        return _table(data, fmt, mapping, max_rows, DATASET_DECODED_FACTOR * max_bytes)
    raise WorkloadFileError(f"unknown format {fmt!r}")


def _too_many(max_rows: int) -> WorkloadFileError:
    return WorkloadFileError(f"more than {max_rows} rows ({env_name('api.max_dataset_lines')})")


def _jsonl(data: bytes, max_rows: int) -> Iterator[tuple[int, dict[str, Any]]]:
    index, start, number = 0, 0, 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        number += 1
        line = data[start:end].strip()
        start = end + 1
        if not line or line.startswith(b"#"):
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise WorkloadFileError(str(exc), line=number) from None
        if not isinstance(record, dict):
            raise WorkloadFileError("each line must be a JSON object", line=number)
        if index >= max_rows:
            raise _too_many(max_rows)
        yield index, record
        index += 1


def _json(data: bytes, max_rows: int) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise WorkloadFileError(f"not JSON: {exc}") from None
    if not isinstance(document, list):
        raise WorkloadFileError("a JSON dataset is an array of objects (one a row)")
    if len(document) > max_rows:
        raise _too_many(max_rows)
    for index, record in enumerate(document):
        if not isinstance(record, dict):
            raise WorkloadFileError(f"row {index}: not a JSON object")
        yield index, record


def _table(
    data: bytes, fmt: str, mapping: dict[str, str], max_rows: int, max_decoded: int
) -> Iterator[tuple[int, dict[str, Any]]]:
    import pyarrow as pa  # noqa: PLC0415 - a dependency, but heavy to import for JSON only

    try:
        batches = _table_batches(pa.py_buffer(data), fmt, mapping, max_rows, max_decoded)
        index = 0
        for batch in batches:
            if batch.nbytes > max_decoded:
                raise WorkloadFileError(_decoded_message(batch.nbytes, max_decoded))
            for record in batch.to_pylist():
                if index >= max_rows:
                    raise _too_many(max_rows)
                yield index, record
                index += 1
    except (pa.ArrowException, OSError, ValueError) as exc:
        if isinstance(exc, WorkloadFileError):
            raise
        raise WorkloadFileError(f"not a readable {fmt} file ({str(exc)[:300]})") from None


def _decoded_message(size: int, cap: int) -> str:
    return (
        f"its columns decode to {size} bytes, more than the {cap} allowed "
        f"({DATASET_DECODED_FACTOR} × {env_name('api.max_dataset_bytes')})"
    )


def _chosen(names: list[str], mapping: dict[str, str]) -> list[str]:
    if len(names) > MAX_DATASET_COLUMNS:
        raise WorkloadFileError(f"more than {MAX_DATASET_COLUMNS} columns")
    if not mapping:
        return list(_auto_columns(names).values())
    missing = [column for column in mapping.values() if column not in names]
    if missing:
        shown = ", ".join(names[:20])
        raise WorkloadFileError(f"no column {missing[0]!r} (the file has: {shown})")
    return list(dict.fromkeys(mapping.values()))


def _table_batches(
    buffer: Any, fmt: str, mapping: dict[str, str], max_rows: int, max_decoded: int
) -> Iterator[Any]:
    import pyarrow as pa  # noqa: PLC0415

    if fmt == "parquet":
        import pyarrow.parquet as pq  # noqa: PLC0415

        parquet = pq.ParquetFile(pa.BufferReader(buffer))
        names = list(parquet.schema_arrow.names)
        columns = _chosen(names, mapping)
        meta = parquet.metadata
        if meta.num_rows > max_rows:
            raise _too_many(max_rows)
        # Leaf columns of the chosen ones (a conversation is a list of structs: several).
        positions = [
            i
            for i in range(meta.num_columns)
            if meta.schema.column(i).path.split(".")[0] in columns
        ]
        decoded = sum(
            meta.row_group(g).column(i).total_uncompressed_size
            for g in range(meta.num_row_groups)
            for i in positions
        )
        if decoded > max_decoded:
            raise WorkloadFileError(_decoded_message(decoded, max_decoded))
        yield from parquet.iter_batches(batch_size=_BATCH_ROWS, columns=columns)
        return
    if fmt == "csv":
        import pyarrow.csv as pcsv  # noqa: PLC0415

        probe = pcsv.open_csv(pa.BufferReader(buffer))
        names = list(probe.schema.names)
        columns = _chosen(names, mapping)
        text = {c: pa.string() for c in columns if c != mapping.get("output_tokens")}
        reader = pcsv.open_csv(
            pa.BufferReader(buffer),
            convert_options=pcsv.ConvertOptions(include_columns=columns, column_types=text),
        )
        yield from reader
        return
    if bytes(buffer[:6]) == b"ARROW1":
        reader = pa.ipc.open_file(pa.BufferReader(buffer))
        columns = _chosen(list(reader.schema.names), mapping)
        for number in range(reader.num_record_batches):
            yield reader.get_batch(number).select(columns)
        return
    stream = pa.ipc.open_stream(pa.BufferReader(buffer))
    columns = _chosen(list(stream.schema.names), mapping)
    for batch in stream:
        yield batch.select(columns)
