"""Parsing an import in a child process of bounded memory and time.

``python -m analytics.imports.child``: the parent writes one JSON header line (the tool,
the entries' paths and sizes, the memory cap) and then the entries' bytes to the child's
stdin; the child caps its own memory (``RLIMIT_DATA``) before it reads anything, groups
the entries into sets, reads each set with its tool's importer and answers one JSON line:
``{"ok": true, "runs": [...], "skipped": [folders]}`` or ``{"ok": false, "message": ...}``.
The parent kills a child that outlives ``IMPORT_PARSE_TIMEOUT_S``. An untrusted file so
costs the child, never the control plane (the same scheme as dataset conversion,
``analytics.datasets.process``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from analytics.imports.errors import ImportFormatError, NotRecognised
from analytics.imports.model import ImportedRun
from analytics.imports.sets import grouped
from analytics.imports.tools import runs_in
from scenarios.child_process import ChildFailed, ask_child, read_request
from scenarios.limits import DATASET_PROCESS_DATA_BYTES, IMPORT_PARSE_TIMEOUT_S

__all__ = ["Parsed", "main", "parse", "parse_in_child"]

_RUNS = TypeAdapter(list[ImportedRun])


@dataclass(frozen=True, slots=True)
class Parsed:
    """The runs found, and the folders in which the tool found nothing."""

    runs: list[ImportedRun]
    skipped: list[str]


def parse(entries: Sequence[tuple[str, bytes]], tool: str = "auto") -> Parsed:
    """The runs in ``entries`` (in this process). A folder in which no file is a result
    is skipped; none at all, or any set that is a result but malformed, is an error."""
    runs: list[ImportedRun] = []
    skipped: list[str] = []
    first_error: NotRecognised | None = None
    for fileset in grouped(entries):
        try:
            runs.extend(runs_in(fileset.files, tool))
        except NotRecognised as exc:
            first_error = first_error or exc
            skipped.append(fileset.folder or ".")
        except ImportFormatError as exc:  # a result, malformed: the whole import is refused
            where = fileset.label(exc.where) if exc.where else fileset.folder or None
            raise ImportFormatError(exc.reason, where) from None
    if not runs:
        raise first_error or ImportFormatError("no files to import")
    return Parsed(runs, skipped)


def parse_in_child(
    entries: Sequence[tuple[str, bytes]],
    tool: str = "auto",
    timeout_s: float = IMPORT_PARSE_TIMEOUT_S,
) -> Parsed:
    """``parse(entries, tool)`` in a fresh child process (blocking: call it off the event
    loop); ImportFormatError with the child's reason when the files cannot be read, need
    too much memory, or take too long."""
    header = {
        "tool": tool,
        "paths": [path for path, _ in entries],
        "sizes": [len(data) for _, data in entries],
        "memory_bytes": DATASET_PROCESS_DATA_BYTES,
    }
    data = b"".join(data for _, data in entries)
    try:
        asked = ask_child("analytics.imports.child", header, data, timeout_s, "reading the files")
    except ChildFailed as exc:
        raise ImportFormatError(exc.reason) from None
    answer = asked.answer
    if not answer.get("ok"):
        raise ImportFormatError(str(answer.get("message")), answer.get("where"))
    try:
        runs = _RUNS.validate_python(answer["runs"])
    except (KeyError, ValidationError) as exc:  # pragma: no cover - the child's own output
        raise ImportFormatError(f"the reading process answered malformed runs ({exc})") from None
    return Parsed(runs, [str(s) for s in answer.get("skipped", [])])


def _answer(value: dict[str, Any]) -> None:
    sys.stdout.buffer.write(json.dumps(value).encode())
    sys.stdout.flush()


def main() -> int:
    """Child side: read the entries on stdin, answer on stdout."""
    request, data = read_request(DATASET_PROCESS_DATA_BYTES)
    entries: list[tuple[str, bytes]] = []
    offset = 0
    for path, size in zip(request["paths"], request["sizes"], strict=True):
        entries.append((str(path), data[offset : offset + int(size)]))
        offset += int(size)
    try:
        parsed = parse(entries, str(request["tool"]))
    except ImportFormatError as exc:
        _answer({"ok": False, "message": exc.reason, "where": exc.where})
        return 0
    except MemoryError:
        _answer({"ok": False, "message": "reading the files needs more memory than allowed"})
        return 0
    runs = _RUNS.dump_python(parsed.runs, mode="json")
    _answer({"ok": True, "runs": runs, "skipped": parsed.skipped})
    return 0


if __name__ == "__main__":
    sys.exit(main())
