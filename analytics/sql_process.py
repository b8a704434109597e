"""User SQL in a child process: ``python -m analytics.sql_process`` and its async caller.

The server that ingests cannot run user SQL on its own connection (see
analytics/snapshot.py), and should not: a query that escapes its limits must not take
the control plane with it. Each query runs in a fresh child that opens the database
copy through :func:`analytics.safe_sql.run_query` (statement check, read-only locked
connection, memory and thread caps, statement timeout, row cap). The parent adds a hard
wall-clock limit: a child still running ``grace_s`` after the statement timeout is
killed, whatever it is doing.

Protocol: the request is one JSON object on stdin; the answer is one JSON line on stdout
(``{"ok": true, "rows": …, "truncated": …, "elapsed_s": …}`` or ``{"ok": false, "kind":
"refused" | "timeout" | "invalid" | "busy", "message": …}``), followed on success by the
result as an Arrow IPC stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from analytics.safe_sql import (
    DatabaseBusyError,
    SqlError,
    SqlLimits,
    SqlRefused,
    SqlTimeout,
    encode,
    run_query,
)

# Time a child may take beyond the statement timeout (interpreter start, encoding).
GRACE_S = 10.0
MAX_ANSWER_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ChildResult:
    """A child's answer: the rows, whether the row cap cut them, the query's time."""

    table: pa.Table
    truncated: bool
    elapsed_s: float


class SqlUnavailable(RuntimeError):
    """The query process could not run (crashed, or the database copy is unusable)."""


def _answer(out: Any, header: dict[str, Any], payload: bytes = b"") -> None:
    out.write(json.dumps(header).encode() + b"\n")
    out.write(payload)
    out.flush()


def main() -> int:
    """Child side: run the request read from stdin, answer on stdout."""
    out = sys.stdout.buffer
    request = json.loads(sys.stdin.buffer.read())
    limits = SqlLimits(
        max_rows=int(request["max_rows"]),
        timeout_s=float(request["timeout_s"]),
        max_memory=str(request["max_memory"]),
        threads=int(request["threads"]),
    )
    try:
        result = run_query(Path(request["database"]), str(request["sql"]), limits)
    except SqlRefused as exc:
        _answer(out, {"ok": False, "kind": "refused", "message": str(exc)})
        return 0
    except SqlTimeout as exc:
        _answer(out, {"ok": False, "kind": "timeout", "message": str(exc)})
        return 0
    except SqlError as exc:
        _answer(out, {"ok": False, "kind": "invalid", "message": str(exc)})
        return 0
    except (DatabaseBusyError, duckdb.IOException, FileNotFoundError) as exc:
        _answer(out, {"ok": False, "kind": "busy", "message": str(exc).splitlines()[0]})
        return 0
    header = {
        "ok": True,
        "rows": result.table.num_rows,
        "truncated": result.truncated,
        "elapsed_s": result.elapsed_s,
    }
    _answer(out, header, encode(result.table, "arrow"))
    return 0


async def run_in_child(database: Path, sql: str, limits: SqlLimits) -> ChildResult:
    """Run ``sql`` on ``database`` in a fresh child process under ``limits``.

    Raises the child's SqlRefused / SqlTimeout / SqlError, SqlTimeout when the child had
    to be killed, and SqlUnavailable when it failed otherwise."""
    request = {
        "database": str(database),
        "sql": sql,
        "max_rows": limits.max_rows,
        "timeout_s": limits.timeout_s,
        "max_memory": limits.max_memory,
        "threads": limits.threads,
    }
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "analytics.sql_process",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        limit=MAX_ANSWER_BYTES,
    )
    try:
        stdout, stderr = await asyncio.wait_for(
            child.communicate(json.dumps(request).encode()), limits.timeout_s + GRACE_S
        )
    except TimeoutError:
        raise SqlTimeout(
            f"query stopped after the {limits.timeout_s:g} s statement timeout (process killed)"
        ) from None
    finally:
        if child.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                child.kill()
            await child.wait()
    head, _, payload = stdout.partition(b"\n")
    try:
        header = json.loads(head)
    except ValueError:
        tail = stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise SqlUnavailable(f"the query process failed: {tail[0]}") from None
    if not header["ok"]:
        kind, message = header["kind"], header["message"]
        if kind == "refused":
            raise SqlRefused(message)
        if kind == "timeout":
            raise SqlTimeout(message)
        if kind == "busy":
            raise SqlUnavailable(message)
        raise SqlError(message)
    table = pa.ipc.open_stream(pa.py_buffer(payload)).read_all()
    return ChildResult(table, bool(header["truncated"]), float(header["elapsed_s"]))


__all__ = ["ChildResult", "SqlUnavailable", "encode", "run_in_child"]

if __name__ == "__main__":
    raise SystemExit(main())
