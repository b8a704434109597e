"""JSONL inputs of a workload: captured traffic logs (replay) and chat prompt files.

One JSON object per line; blank lines and lines starting with ``#`` are skipped. A
line may give ``messages`` (OpenAI chat messages) or ``prompt`` (one user message).
Replay lines also carry ``timestamp`` (seconds as a number, or an ISO-8601 instant) and
``max_tokens``, and optionally ``session_id`` (a string or integer) and ``turn`` (an
integer): the lines of one session id are the turns of one captured conversation.
Errors name the source and line, so a bad log fails before any request.

Parsing works on bytes, and is shared: the dataset store validates uploads with it
(``analytics/datasets/uploads.py``), workers parse the bytes they get from Redis
(``workers/prompts/datasets.py``), never a file a scenario names. The only file access is
:func:`read_bounded`, used where the local user's own files are read (``tokenbench run``
and ``submit``): regular files of bounded size only; a FIFO or device never blocks it.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import orjson

from scenarios.errors import BadInput
from scenarios.limits import MAX_SESSION_ID_CHARS
from scenarios.settings import env_name

__all__ = [
    "DatasetSummary",
    "FileEntry",
    "WorkloadFileError",
    "first_turn",
    "inspect_dataset",
    "parse_entries",
    "prompt_text",
    "read_bounded",
]

Message = tuple[str, str]  # (role, content)


class WorkloadFileError(BadInput, ValueError):
    """A replay log or prompt file that cannot be used; the message names source and line."""

    def __init__(self, message: str, source: str | None = None, line: int | None = None) -> None:
        where = source or ""
        if line is not None:
            where = f"{where}:{line}" if where else f"line {line}"
        super().__init__(f"{where}: {message}" if where else message)
        self.reason = message
        self.line = line


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One line of a prompt file or traffic log; ``row`` is the row of the dataset file it
    came from (0-based; a converted file's lines say it, else the entry's own index)."""

    messages: tuple[Message, ...]
    max_tokens: int | None = None
    timestamp_s: float | None = None
    session_id: str | None = None  # the captured session this line is a turn of
    turn: int | None = None  # its place in that session (else timestamp order)
    row: int | None = None  # the converted dataset's source row (workload.dataset)


def first_turn(messages: tuple[Message, ...]) -> tuple[tuple[Message, ...], str | None]:
    """One request from a conversation, as ``vllm bench serve`` uses ShareGPT: the turns
    up to and including the first user turn are the prompt, the assistant turn right after
    it (if any) the reference answer. Without a user turn, the whole conversation."""
    for index, (role, _) in enumerate(messages):
        if role == "user":
            after = messages[index + 1] if index + 1 < len(messages) else None
            answer = after[1] if after is not None and after[0] == "assistant" else None
            return messages[: index + 1], answer
    return messages, None


@dataclass(frozen=True, slots=True)
class DatasetSummary:
    """What a dataset can be used for: always ``prompts``; ``replay`` when every line has
    a timestamp and ``max_tokens`` (then ``replay_times`` are its sorted timestamps),
    else ``replay_problem`` says which line lacks what."""

    entries: int
    replay_times: tuple[float, ...] | None
    replay_problem: str | None
    kinds_override: tuple[str, ...] | None = None  # e.g. a tokenizer.json: ("tokenizer",)
    # Entries with no answer length (no max_tokens, no assistant turn after the first
    # user turn): as workload.dataset rows they take their answer length from the mix.
    unanswered: int = 0

    @property
    def kinds(self) -> tuple[str, ...]:
        """The uses the dataset is valid for."""
        if self.kinds_override is not None:
            return self.kinds_override
        return ("prompts", "replay") if self.replay_times is not None else ("prompts",)


def prompt_text(messages: tuple[Message, ...]) -> str:
    """The text of a conversation as one prompt: a lone user message is itself; longer
    conversations keep their turns, labelled, so their length is preserved."""
    if len(messages) == 1:
        return messages[0][1]
    return "\n\n".join(f"{role}: {content}" for role, content in messages)


def read_bounded(path: str | Path, max_bytes: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes``.

    Anything else is refused before it is read: a directory, a device, a socket, and a
    FIFO, which is opened non-blocking (and checked again once open) so that a path
    swapped for a FIFO between the check and the open can never block the caller.
    """
    name = str(path)
    try:
        if not stat.S_ISREG(os.stat(name).st_mode):
            raise WorkloadFileError("not a regular file", name)
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise WorkloadFileError(exc.strerror or str(exc), name) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise WorkloadFileError("not a regular file", name)
        if info.st_size > max_bytes:
            raise WorkloadFileError(_too_large(info.st_size, max_bytes), name)
        chunks, size = [], 0
        while size <= max_bytes:  # the file may grow while it is read: read one byte more
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:
            raise WorkloadFileError(_too_large(size, max_bytes), name)
        return b"".join(chunks)
    except OSError as exc:
        raise WorkloadFileError(exc.strerror or str(exc), name) from None
    finally:
        os.close(fd)


def _too_large(size: int, max_bytes: int) -> str:
    variable = env_name("api.max_dataset_bytes")
    return f"{size} bytes is more than the {max_bytes} allowed ({variable})"


def parse_entries(data: bytes, source: str, *, replay: bool) -> tuple[FileEntry, ...]:
    """A dataset's entries: for replay, every line needs a timestamp and ``max_tokens``
    and entries come ordered by timestamp (stable); for prompts, in file order."""
    entries = [
        entry if entry.row is not None else replace(entry, row=index)
        for index, (_, entry) in enumerate(_lines(data, source, replay=replay))
    ]
    if not entries:
        raise WorkloadFileError("no entries", source)
    if replay:
        entries.sort(key=lambda e: e.timestamp_s or 0.0)
    return tuple(entries)


def inspect_dataset(data: bytes, max_lines: int, source: str = "") -> DatasetSummary:
    """Validate an uploaded dataset as prompts (WorkloadFileError names the line) and
    find out whether it can also be replayed. At most ``max_lines`` lines (blank and
    comment lines count: they cost work too)."""
    count, times, problem, unanswered = 0, [], None, 0
    for number, entry in _lines(data, source, replay=False, max_lines=max_lines):
        count += 1
        if entry.max_tokens is None and first_turn(entry.messages)[1] is None:
            unanswered += 1
        if problem is not None:
            continue
        if entry.max_tokens is None:
            problem = f"line {number}: no max_tokens"
        elif entry.timestamp_s is None:
            problem = f"line {number}: no valid timestamp"
        else:
            times.append(entry.timestamp_s)
    if count == 0:
        raise WorkloadFileError("no entries", source)
    if problem is not None:
        return DatasetSummary(count, None, problem, unanswered=unanswered)
    return DatasetSummary(count, tuple(sorted(times)), None, unanswered=unanswered)


def _lines(
    data: bytes, source: str, *, replay: bool, max_lines: int | None = None
) -> Iterator[tuple[int, FileEntry]]:
    """(line number, entry) of every entry, reading lines lazily: a body of blank lines
    must not become millions of objects at once."""
    start, number, size = 0, 0, len(data)
    while start < size:
        end = data.find(b"\n", start)
        end = size if end < 0 else end
        number += 1
        if max_lines is not None and number > max_lines:
            raise WorkloadFileError(
                f"more than {max_lines} lines ({env_name('api.max_dataset_lines')})", source
            )
        line = data[start:end].strip()
        start = end + 1
        if not line or line.startswith(b"#"):
            continue
        try:
            entry = _entry(orjson.loads(line), replay)
        except (orjson.JSONDecodeError, ValueError, TypeError, KeyError, OverflowError) as exc:
            raise WorkloadFileError(_reason(exc), source, number) from None
        yield number, entry


def _reason(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"missing {exc.args[0]}"
    return str(exc)


def _entry(data: object, replay: bool) -> FileEntry:
    if not isinstance(data, dict):
        raise TypeError("each line must be a JSON object")
    messages = _messages(data)
    max_tokens = data.get("max_tokens")
    if max_tokens is not None and (
        not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1
    ):
        raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    row = data.get("row")
    if row is not None and (not isinstance(row, int) or isinstance(row, bool) or row < 0):
        raise ValueError(f"row must be a non-negative integer, got {row!r}")
    if replay:
        if max_tokens is None:
            raise KeyError("max_tokens")
        session_id, turn = _session(data)
        return FileEntry(
            messages, max_tokens, _seconds(data["timestamp"]), session_id, turn, row=row
        )
    # A prompt file may carry timestamps; a bad one only makes it unfit for replay.
    try:
        timestamp = _seconds(data["timestamp"]) if "timestamp" in data else None
    except (ValueError, OverflowError):
        timestamp = None
    return FileEntry(messages, max_tokens, timestamp, row=row)


def _messages(data: dict[str, object]) -> tuple[Message, ...]:
    if "prompt" in data:
        prompt = data["prompt"]
        if not isinstance(prompt, str) or not prompt:
            raise ValueError("prompt must be a non-empty string")
        return (("user", prompt),)
    raw = data.get("messages")
    if not isinstance(raw, list) or not raw:
        raise ValueError("give messages (a non-empty list) or prompt")
    messages = []
    for message in raw:
        if not isinstance(message, dict):
            raise TypeError("each message must be an object with role and content")
        role, content = message.get("role"), message.get("content")
        if not isinstance(role, str) or not isinstance(content, str):
            raise ValueError("each message needs string role and content")
        messages.append((role, content))
    return tuple(messages)


def _session(data: dict[str, object]) -> tuple[str | None, int | None]:
    """A replay line's ``session_id`` (a string or an integer, kept as a string) and
    ``turn`` (an integer ≥ 0; only with a session id)."""
    raw, turn = data.get("session_id"), data.get("turn")
    if raw is None:
        if turn is not None:
            raise ValueError("turn needs a session_id")
        return None, None
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        raise ValueError(f"session_id must be a string or an integer, got {raw!r}")
    session_id = str(raw)
    if not session_id or len(session_id) > MAX_SESSION_ID_CHARS:
        raise ValueError(f"session_id must have 1 to {MAX_SESSION_ID_CHARS} characters")
    if turn is not None and (not isinstance(turn, int) or isinstance(turn, bool) or turn < 0):
        raise ValueError(f"turn must be an integer >= 0, got {turn!r}")
    return session_id, turn


def _seconds(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = datetime.fromisoformat(value).timestamp()
    else:
        raise ValueError(f"timestamp must be seconds or an ISO-8601 instant, got {value!r}")
    if not math.isfinite(seconds):
        raise ValueError("timestamp must be a finite number")
    return seconds
