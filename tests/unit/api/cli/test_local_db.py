"""api/cli/local_db.py: a DuckDB file held by another process is named with that
process and the way round it (--server); other open errors keep DuckDB's first line."""

from __future__ import annotations

from pathlib import Path

import duckdb

from api.cli.local_db import database_error
from scenarios.errors import Unavailable

LOCKED = (
    'IO Error: Could not set lock on file "/data/t.duckdb": Conflicting lock is held in '
    "/usr/bin/python3.11 (PID 4242). See also https://duckdb.org/docs/current/connect/concurrency"
)


def test_a_held_file_names_its_holder_and_suggests_server() -> None:
    error = database_error(Path("/data/t.duckdb"), duckdb.IOException(LOCKED))
    assert isinstance(error, Unavailable) and error.exit_code == 1
    message = str(error)
    assert "\n" not in message
    assert message.startswith("/data/t.duckdb is in use by process 4242")
    assert "--server URL" in message


def test_another_io_error_keeps_duckdbs_first_line() -> None:
    error = database_error(Path("x.duckdb"), duckdb.IOException("IO Error: disk full\nmore"))
    assert str(error) == "cannot open x.duckdb: IO Error: disk full"
