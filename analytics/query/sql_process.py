"""User SQL in a child process: ``python -m analytics.query.sql_process`` and its async caller.

The server that ingests cannot run user SQL on its own connection (see
analytics/query/snapshot.py), and should not: a query that escapes its limits must not take
the control plane with it. Each query runs in a fresh child that opens the database
copy through :func:`analytics.query.safe_sql.run_query` (statement check, read-only locked
connection, memory and thread caps, statement timeout, row and byte caps) and encodes
the answer itself, so the control plane only ever relays bytes it has bounded:

- the child's memory is capped by the operating system (``RLIMIT_DATA``), beyond
  DuckDB's own ``max_memory``, which does not cover the Arrow result or its encoding;
- the child stops reading and encoding as soon as the answer exceeds ``max_bytes`` and
  answers ``too_large`` instead;
- the parent reads at most a bounded header line and then at most ``max_bytes`` of
  answer, killing a child that announces or sends more.

The parent adds a hard wall-clock limit: a child still running ``grace_s`` after the
statement timeout is killed, whatever it is doing.

Protocol: the request is one JSON object on stdin; the answer is one JSON line on stdout
(``{"ok": true, "rows": …, "truncated": …, "elapsed_s": …, "columns": […], "bytes": N}``
or ``{"ok": false, "kind": "refused" | "timeout" | "invalid" | "busy" | "too_large" |
"failed", "message": …}``: a class and a sentence, no Python names, no server
paths), followed on success by exactly N bytes: the answer in the requested
format (for JSON, the array of row objects).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from analytics.query.safe_sql import (
    DatabaseBusyError,
    SqlError,
    SqlLimits,
    SqlRefused,
    SqlTimeout,
    SqlTooLarge,
    encode,
    encode_capped,
    public_message,
    run_query,
    too_large_message,
)
from scenarios.errors import Unavailable
from scenarios.limits import SQL_PROCESS_DATA_BYTES, cap_data_memory

# Time a child may take beyond the statement timeout (interpreter start, encoding).
GRACE_S = 10.0
# Longest header line the parent reads (column names and types of a wide answer).
MAX_HEADER_BYTES = 1024 * 1024
# What the parent keeps of a child's stderr (the last lines name a crash).
MAX_STDERR_BYTES = 16 * 1024
# What a user reads when the child failed on a fault of ours (its traceback is logged).
FAILED_MESSAGE = "the query process failed on an internal error (logged on the server)"
_log = logging.getLogger(__name__)
# Kinds of refusal the child answers with, and the error each becomes in the parent.
_ERRORS: dict[str, type[SqlError]] = {
    error.sql_kind: error for error in (SqlRefused, SqlTimeout, SqlTooLarge, SqlError)
}


@dataclass(frozen=True, slots=True)
class ChildResult:
    """A child's answer: the encoded rows, their columns, whether the row cap cut them,
    the query's time."""

    payload: bytes
    fmt: str
    rows: int
    truncated: bool
    elapsed_s: float
    columns: list[dict[str, str]] = field(default_factory=list)

    @property
    def table(self) -> pa.Table:
        """The rows as an Arrow table (answers in the ``arrow`` format only)."""
        if self.fmt != "arrow":
            raise ValueError(f"the answer is {self.fmt}, not arrow")
        return pa.ipc.open_stream(pa.py_buffer(self.payload)).read_all()


class SqlUnavailable(Unavailable, RuntimeError):
    """The query process could not run (crashed, or the database copy is unusable)."""

    def public_fields(self) -> dict[str, object]:
        """The REST body's ``kind``, as for every SQL refusal."""
        return {"kind": "unavailable"}


def _answer(out: Any, header: dict[str, Any], payload: bytes = b"") -> None:
    out.write(json.dumps(header).encode() + b"\n")
    out.write(payload)
    out.flush()


def main() -> int:
    """Child side: run the request read from stdin, answer on stdout."""
    out = sys.stdout.buffer
    request = json.loads(sys.stdin.buffer.read())
    cap_data_memory(int(request.get("memory_bytes", SQL_PROCESS_DATA_BYTES)))
    max_bytes = request.get("max_bytes")
    limits = SqlLimits(
        max_rows=int(request["max_rows"]),
        timeout_s=float(request["timeout_s"]),
        max_memory=str(request["max_memory"]),
        threads=int(request["threads"]),
        max_bytes=None if max_bytes is None else int(max_bytes),
    )
    fmt = str(request.get("format", "arrow"))
    try:
        result = run_query(Path(request["database"]), str(request["sql"]), limits)
        payload = encode_capped(result.table, fmt, limits.max_bytes)
    except SqlError as exc:
        _answer(out, {"ok": False, "kind": exc.sql_kind, "message": str(exc)})
        return 0
    except MemoryError:
        message = f"the answer needs more memory than a query may use ({limits.max_memory})"
        _answer(out, {"ok": False, "kind": "too_large", "message": message})
        return 0
    except (DatabaseBusyError, duckdb.IOException, FileNotFoundError) as exc:
        message = public_message(str(exc).splitlines()[0] if str(exc) else "busy")
        _answer(out, {"ok": False, "kind": "busy", "message": message})
        return 0
    except Exception:
        # A fault of ours, not of the query: the traceback goes to stderr (the server's
        # log); the user reads a class and a sentence, no Python names or paths.
        traceback.print_exc()
        _answer(out, {"ok": False, "kind": "failed", "message": FAILED_MESSAGE})
        return 0
    header = {
        "ok": True,
        "rows": result.table.num_rows,
        "truncated": result.truncated,
        "elapsed_s": result.elapsed_s,
        "columns": [{"name": f.name, "type": str(f.type)} for f in result.table.schema],
        "bytes": len(payload),
    }
    _answer(out, header, payload)
    return 0


async def run_in_child(
    database: Path, sql: str, limits: SqlLimits, fmt: str = "arrow"
) -> ChildResult:
    """Run ``sql`` on ``database`` in a fresh child process under ``limits``; the answer
    comes encoded as ``fmt`` (json, csv, arrow or parquet).

    Raises the child's SqlRefused / SqlTimeout / SqlTooLarge / SqlError, SqlTimeout when
    the child had to be killed, SqlTooLarge when it sends more than ``limits.max_bytes``,
    and SqlUnavailable when it failed otherwise."""
    request = {
        "database": str(database),
        "sql": sql,
        "max_rows": limits.max_rows,
        "timeout_s": limits.timeout_s,
        "max_memory": limits.max_memory,
        "threads": limits.threads,
        "max_bytes": limits.max_bytes,
        "memory_bytes": SQL_PROCESS_DATA_BYTES,
        "format": fmt,
    }
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "analytics.query.sql_process",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        limit=MAX_HEADER_BYTES,
    )
    stderr_tail = bytearray()
    drain = asyncio.create_task(_keep_tail(child, stderr_tail))
    try:
        return await asyncio.wait_for(
            _exchange(child, request, limits.max_bytes, fmt), limits.timeout_s + GRACE_S
        )
    except TimeoutError:
        raise SqlTimeout(
            f"query stopped after the {limits.timeout_s:g} s statement timeout (process killed)"
        ) from None
    except _NoAnswer:
        await child.wait()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(drain), 2.0)  # the crash's last words
        tail = stderr_tail.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        # The crash's own words are the server's (Python names, paths): logged, not shown.
        _log.warning("query process exited %s without an answer: %s", child.returncode, tail[0])
        raise SqlUnavailable(
            f"the query process failed without an answer (exit status {child.returncode})"
        ) from None
    finally:
        if child.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                child.kill()
        await child.wait()
        drain.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await drain


class _NoAnswer(Exception):
    """The child exited (or wrote garbage) without a header line."""


async def _exchange(
    child: asyncio.subprocess.Process,
    request: dict[str, Any],
    max_bytes: int | None,
    fmt: str,
) -> ChildResult:
    """Send the request, read a bounded header, then at most ``max_bytes`` of answer."""
    assert child.stdin is not None
    assert child.stdout is not None
    child.stdin.write(json.dumps(request).encode())
    with contextlib.suppress(ConnectionError):
        await child.stdin.drain()
    child.stdin.close()
    try:
        head = await child.stdout.readuntil(b"\n")
        header = json.loads(head)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
        raise _NoAnswer from None
    if not header["ok"]:
        kind, message = header["kind"], header["message"]
        if kind in ("busy", "failed"):
            raise SqlUnavailable(message)
        raise _ERRORS.get(kind, SqlError)(message)
    size = int(header["bytes"])
    if max_bytes is not None and size > max_bytes:
        raise SqlTooLarge(too_large_message(max_bytes))  # the child is killed by the caller
    try:
        payload = await child.stdout.readexactly(size)
    except asyncio.IncompleteReadError:
        raise SqlUnavailable("the query process stopped in the middle of its answer") from None
    return ChildResult(
        payload=payload,
        fmt=fmt,
        rows=int(header["rows"]),
        truncated=bool(header["truncated"]),
        elapsed_s=float(header["elapsed_s"]),
        columns=list(header.get("columns", [])),
    )


async def _keep_tail(child: asyncio.subprocess.Process, tail: bytearray) -> None:
    """Read the child's stderr to its end (so it never blocks on a full pipe), keeping
    only the last MAX_STDERR_BYTES."""
    assert child.stderr is not None
    while chunk := await child.stderr.read(64 * 1024):
        tail.extend(chunk)
        del tail[:-MAX_STDERR_BYTES]


__all__ = ["ChildResult", "SqlUnavailable", "encode", "run_in_child"]

if __name__ == "__main__":
    raise SystemExit(main())
