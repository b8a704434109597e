"""Converting a dataset file in a child process of bounded memory and time.

``python -m analytics.datasets.process``: the parent writes one JSON header line (the
conversion, the row and byte caps) and then the file's bytes to the child's stdin; the
child caps its own memory (``RLIMIT_DATA``, ``scenarios.limits.DATASET_PROCESS_DATA_BYTES``)
before it reads anything, converts with ``scenarios.datasets.formats.convert`` and
answers one JSON line (``{"ok": true, "source_format": …, "source_rows": …, "rows": …,
"skipped": {…}}`` or ``{"ok": false, "message": …, "line": …}``) followed by the entries'
JSONL. The parent kills a child that outlives ``DATASET_CONVERSION_TIMEOUT_S``. A file
crafted to decompress into gigabytes, or to take minutes, so costs the child, never the
control plane that received it.
"""

from __future__ import annotations

import json
import sys

from scenarios.child_process import ChildFailed, ask_child, read_request
from scenarios.datasets.files import WorkloadFileError
from scenarios.datasets.formats import Conversion, Converted, convert
from scenarios.limits import (
    DATASET_CONVERSION_TIMEOUT_S,
    DATASET_PROCESS_DATA_BYTES,
)

__all__ = ["convert_in_child", "main"]


def convert_in_child(
    data: bytes,
    conversion: Conversion,
    max_rows: int,
    max_bytes: int,
    name: str = "",
    timeout_s: float = DATASET_CONVERSION_TIMEOUT_S,
) -> Converted:
    """``convert(data, ...)`` in a fresh child process (blocking: call it off the event
    loop); WorkloadFileError with the child's reason when the file cannot be converted,
    needs too much memory, or takes too long."""
    header = {
        "format": conversion.format,
        "columns": dict(conversion.columns),
        "max_rows": max_rows,
        "max_bytes": max_bytes,
        "name": name,
        "memory_bytes": DATASET_PROCESS_DATA_BYTES,
    }
    try:
        asked = ask_child(
            "analytics.datasets.process", header, data, timeout_s, "converting the file"
        )
    except ChildFailed as exc:
        raise WorkloadFileError(exc.reason) from None
    answer = asked.answer
    if not answer.get("ok"):
        raise WorkloadFileError(str(answer.get("message")), line=answer.get("line"))
    return Converted(
        asked.payload,
        str(answer["source_format"]),
        int(answer["source_rows"]),
        int(answer["rows"]),
        {str(k): int(v) for k, v in dict(answer["skipped"]).items()},
    )


def main() -> int:
    """Child side: convert the file on stdin, answer on stdout."""
    request, data = read_request(DATASET_PROCESS_DATA_BYTES)
    out = sys.stdout.buffer
    conversion = Conversion.of(str(request["format"]), dict(request["columns"]))
    try:
        converted = convert(
            data, conversion, int(request["max_rows"]), int(request["max_bytes"]), request["name"]
        )
    except WorkloadFileError as exc:
        out.write(json.dumps({"ok": False, "message": exc.reason, "line": exc.line}).encode())
        out.write(b"\n")
        return 0
    except MemoryError:
        message = "converting the file needs more memory than a conversion may use"
        out.write(json.dumps({"ok": False, "message": message}).encode() + b"\n")
        return 0
    header = {
        "ok": True,
        "source_format": converted.source_format,
        "source_rows": converted.source_rows,
        "rows": converted.rows,
        "skipped": converted.skipped,
    }
    out.write(json.dumps(header).encode() + b"\n")
    out.write(converted.content)
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
