"""JSONL inputs of a workload: captured traffic logs (replay) and chat prompt files.

One JSON object per line; blank lines and lines starting with ``#`` are skipped. A
line may give ``messages`` (OpenAI chat messages) or ``prompt`` (one user message).
Replay lines also carry ``timestamp`` (seconds as a number, or an ISO-8601 instant) and
``max_tokens``. Errors name the file and line, so a bad log fails before any request.
Files are parsed once per process and path (shards of a run share them).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import orjson

__all__ = ["FileEntry", "WorkloadFileError", "load_prompts", "load_replay", "prompt_text"]

Message = tuple[str, str]  # (role, content)


class WorkloadFileError(ValueError):
    """A replay log or prompt file that cannot be used; the message names file and line."""


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One line of a prompt file or traffic log."""

    messages: tuple[Message, ...]
    max_tokens: int | None = None
    timestamp_s: float | None = None


def prompt_text(messages: tuple[Message, ...]) -> str:
    """The text of a conversation as one prompt: a lone user message is itself; longer
    conversations keep their turns, labelled, so their length is preserved."""
    if len(messages) == 1:
        return messages[0][1]
    return "\n\n".join(f"{role}: {content}" for role, content in messages)


def load_replay(path: str) -> tuple[FileEntry, ...]:
    """A traffic log's entries, ordered by timestamp (each has one and ``max_tokens``)."""
    entries = _parse(str(Path(path).resolve()), replay=True)
    return tuple(sorted(entries, key=lambda e: e.timestamp_s or 0.0))


def load_prompts(path: str) -> tuple[FileEntry, ...]:
    """A prompt file's entries, in file order."""
    return _parse(str(Path(path).resolve()), replay=False)


@functools.lru_cache(maxsize=8)
def _parse(path: str, *, replay: bool) -> tuple[FileEntry, ...]:
    try:
        lines = Path(path).read_bytes().splitlines()
    except OSError as exc:
        raise WorkloadFileError(f"{path}: {exc.strerror or exc}") from None
    entries = []
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith(b"#"):
            continue
        try:
            entries.append(_entry(orjson.loads(line), replay))
        except (orjson.JSONDecodeError, ValueError, TypeError, KeyError) as exc:
            raise WorkloadFileError(f"{path}:{number}: {exc}") from None
    if not entries:
        raise WorkloadFileError(f"{path}: no entries")
    return tuple(entries)


def _entry(data: object, replay: bool) -> FileEntry:
    if not isinstance(data, dict):
        raise TypeError("each line must be a JSON object")
    messages = _messages(data)
    max_tokens = data.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    timestamp = None
    if replay:
        if max_tokens is None:
            raise KeyError("max_tokens")
        timestamp = _seconds(data["timestamp"])
    return FileEntry(messages, max_tokens, timestamp)


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


def _seconds(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        return datetime.fromisoformat(value).timestamp()
    raise ValueError(f"timestamp must be seconds or an ISO-8601 instant, got {value!r}")
