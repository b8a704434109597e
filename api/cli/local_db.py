"""The local DuckDB file, opened for reading by ``report``, ``sql`` and ``shadow``.

DuckDB lets one process hold a file for writing and no other process open it meanwhile,
not even read-only: while ``tokenbench serve`` (or a ``tokenbench run``) has the file,
the local commands cannot read it. They say so in one line and point to ``--server``,
which reads the same data through the control plane's REST API.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb

from analytics.store.db import connect
from api.cli.errors import exit_for
from scenarios.errors import NotFound, TokenbenchError, Unavailable

_HOLDER = re.compile(r"\(PID (\d+)\)")


def database_error(path: Path, exc: duckdb.IOException) -> TokenbenchError:
    """The error for a file DuckDB could not open: held by another process (its PID
    when DuckDB names it, and what to do instead), or DuckDB's own first line."""
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if "lock" not in first.lower():
        return Unavailable(f"cannot open {path}: {first}")
    pid = _HOLDER.search(first)
    holder = f"process {pid.group(1)}" if pid else "another process"
    return Unavailable(
        f"{path} is in use by {holder} (a control plane or a run writing it): read it "
        "through the control plane with --server URL (e.g. --server http://127.0.0.1:8080), "
        "or wait until that process ends"
    )


def open_read_only(path: Path) -> duckdb.DuckDBPyConnection:
    """``path`` opened read-only; a missing or held file is an exit with its message."""
    try:
        return connect(path, read_only=True)
    except FileNotFoundError as exc:
        raise exit_for(NotFound(str(exc))) from None
    except duckdb.IOException as exc:
        raise exit_for(database_error(path, exc)) from None
