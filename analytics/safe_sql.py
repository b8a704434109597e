"""Running a user's SQL against a results file as untrusted code.

Two layers, so that one mistake does not open the file system:

1. The statement: exactly one, and of type SELECT (which includes WITH, FROM-first,
   VALUES, DESCRIBE, SUMMARIZE, SHOW) or EXPLAIN. COPY, ATTACH, INSTALL/LOAD, SET,
   PRAGMA, CALL, CREATE and every other type are refused by name before execution.
2. The connection: a fresh read-only DuckDB connection whose configuration is fixed at
   open and then locked (``lock_configuration``): ``enable_external_access = false`` (no
   file reads or writes besides the database, no network, no ATTACH of files, no
   extension install/load), extension auto-install/auto-load and community extensions
   off, persistent secrets off, ``max_memory`` and ``threads`` capped. A SELECT that
   calls ``read_csv('/etc/passwd')`` is stopped here.

A timer interrupts a statement that runs longer than the timeout; the result is streamed
as Arrow record batches and cut after ``max_rows`` rows (``truncated`` says so). With a
``max_bytes`` cap, reading stops as soon as the batches read so far exceed it (and
:func:`encode_capped` stops encoding likewise), so an answer never grows past the cap
plus one small batch; a query that needs more memory than ``max_memory`` is refused.

The connection is the caller's process's own read-only handle. DuckDB lets one process
hold a file for writing; while a run writes to it, other processes cannot open it, and a
process that holds a read-write connection to the file cannot open a second one with a
different configuration, so a server that ingests must run user SQL in another process
(or on a copy) — which also keeps a heavy query from stalling ingestion.
"""

from __future__ import annotations

import io
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import duckdb
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from analytics.db import is_current, schema_version, upgrade
from scenarios.errors import BadInput, Refused, Timeout, Unavailable
from scenarios.limits import SQL_PROCESS_DATA_BYTES
from scenarios.settings import env_name

ALLOWED_STATEMENTS = frozenset({duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN})
OUTPUT_FORMATS = ("csv", "json", "parquet", "arrow")


@dataclass(frozen=True, slots=True)
class SqlLimits:
    """Resource limits of one query."""

    max_rows: int = 10_000
    timeout_s: float = 30.0
    max_memory: str = "1GB"
    threads: int = 1
    max_bytes: int | None = None  # answer size cap (None: the local CLI, no cap)


@dataclass(frozen=True, slots=True)
class QueryResult:
    """Rows of a query (at most ``max_rows``) and whether more were cut off."""

    table: pa.Table
    truncated: bool
    elapsed_s: float


class DatabaseBusyError(Unavailable, RuntimeError):
    """The file is held by a connection of this process with another configuration."""


class SqlError(BadInput, ValueError):
    """A query that did not run: refused, timed out, or invalid. The message says which.

    ``sql_kind`` names the class in the query process's answer and in the REST body's
    ``kind`` field (docs/analytics.md, "SQL")."""

    sql_kind: ClassVar[str] = "invalid"
    http_status = 400  # the request is malformed SQL, not an invalid document

    def public_fields(self) -> dict[str, object]:
        """The REST body names the SQL refusal's kind as well as the tree's."""
        return {"kind": self.sql_kind}


class SqlRefused(Refused, SqlError):
    """A statement type or an access that user SQL may not use."""

    sql_kind = "refused"


class SqlTimeout(Timeout, SqlError):
    """The statement ran longer than the limit and was interrupted."""

    sql_kind = "timeout"
    exit_code = 2  # the user's query is too heavy: like any refused query, fix the input


class SqlTooLarge(SqlError):
    """The answer exceeds its byte cap, or the query needs more memory than it may use."""

    sql_kind = "too_large"
    http_status = 413


# Rows per Arrow batch read from DuckDB: small, so the byte cap is checked often.
BATCH_ROWS = 2048


def locked_config(limits: SqlLimits) -> dict[str, str | bool | int | float | list[str]]:
    """Connection settings for untrusted SQL; ``lock_configuration`` must come last."""
    return {
        "enable_external_access": False,
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
        "allow_community_extensions": False,
        "allow_persistent_secrets": False,
        "max_memory": limits.max_memory,
        "threads": limits.threads,
        "lock_configuration": True,
    }


def open_locked(path: str | Path, limits: SqlLimits | None = None) -> duckdb.DuckDBPyConnection:
    """A read-only connection to ``path`` with the locked configuration.

    A tokenbench file written by another version is upgraded first (briefly read-write,
    as a report does: analytics/db.py), so user SQL reads this version's views."""
    if not Path(path).exists():
        raise FileNotFoundError(f"no tokenbench database at {path}")
    con = _connect_locked(path, limits or SqlLimits())
    if schema_version(con) == 0 or is_current(con):
        return con  # current, or not a tokenbench file (left as it is)
    con.close()
    upgrade(path)
    return _connect_locked(path, limits or SqlLimits())


def _connect_locked(path: str | Path, limits: SqlLimits) -> duckdb.DuckDBPyConnection:
    try:
        return duckdb.connect(str(path), read_only=True, config=locked_config(limits))
    except duckdb.ConnectionException as exc:
        # This process already holds the file through another (e.g. writable) connection.
        raise DatabaseBusyError(f"cannot open {path} for user SQL: {_first_line(exc)}") from None


def check_statement(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Refuse anything but a single SELECT/EXPLAIN statement."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise SqlError(_first_line(exc)) from None
    if len(statements) != 1:
        raise SqlRefused(f"give exactly one statement (got {len(statements)})")
    kind = statements[0].type
    if kind not in ALLOWED_STATEMENTS:
        raise SqlRefused(
            f"only SELECT queries are allowed; {kind.name} statements are refused "
            "(results are read-only: no COPY, ATTACH, INSTALL/LOAD, SET, PRAGMA or CALL)"
        )


def run_query(path: str | Path, sql: str, limits: SqlLimits | None = None) -> QueryResult:
    """Run one user query against the database at ``path`` under ``limits``."""
    limits = limits or SqlLimits()
    con = open_locked(path, limits)
    try:
        return run_on(con, sql, limits)
    finally:
        con.close()


def run_on(con: duckdb.DuckDBPyConnection, sql: str, limits: SqlLimits) -> QueryResult:
    """Run one user query on a connection from :func:`open_locked`."""
    check_statement(con, sql)
    started = time.perf_counter()
    timer = threading.Timer(limits.timeout_s, con.interrupt)
    timer.daemon = True
    timer.start()
    try:
        reader = con.sql(sql).to_arrow_reader(min(limits.max_rows + 1, BATCH_ROWS))
        batches: list[pa.RecordBatch] = []
        rows = size = 0
        for batch in reader:
            batches.append(batch)
            rows += batch.num_rows
            size += batch.nbytes
            if limits.max_bytes is not None and size > limits.max_bytes:
                raise SqlTooLarge(too_large_message(limits.max_bytes))
            if rows > limits.max_rows:
                break
        table = pa.Table.from_batches(batches, schema=reader.schema)
    except duckdb.InterruptException:
        raise SqlTimeout(
            f"query stopped after the {limits.timeout_s:g} s statement timeout"
        ) from None
    except duckdb.PermissionException as exc:
        raise SqlRefused(f"refused: {_first_line(exc)}") from None
    except (duckdb.OutOfMemoryException, MemoryError):
        raise SqlTooLarge(_memory_message(limits)) from None
    except (pa.ArrowException, OSError) as exc:
        # Errors while streaming come through Arrow's reader, with DuckDB's message.
        message = _first_line(exc)
        if "out of memory" in message.lower():
            raise SqlTooLarge(_memory_message(limits)) from None
        if "interrupt" in message.lower():
            raise SqlTimeout(
                f"query stopped after the {limits.timeout_s:g} s statement timeout"
            ) from None
        raise SqlError(message) from None
    except duckdb.Error as exc:
        raise SqlError(_first_line(exc)) from None
    finally:
        timer.cancel()
    truncated = table.num_rows > limits.max_rows
    if truncated:
        table = table.slice(0, limits.max_rows)
    return QueryResult(table, truncated, time.perf_counter() - started)


def encode(table: pa.Table, fmt: str) -> bytes:
    """The table as CSV, JSON (an array of objects), Parquet or Arrow IPC stream bytes."""
    if fmt == "csv":
        sink = io.BytesIO()
        pa_csv.write_csv(table, sink)
        return sink.getvalue()
    if fmt == "json":
        return json.dumps(table.to_pylist(), default=str).encode()
    if fmt == "parquet":
        buffer = pa.BufferOutputStream()
        pq.write_table(table, buffer)
        return bytes(buffer.getvalue().to_pybytes())
    if fmt == "arrow":
        buffer = pa.BufferOutputStream()
        with pa.ipc.new_stream(buffer, table.schema) as writer:
            writer.write_table(table)
        return bytes(buffer.getvalue().to_pybytes())
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(OUTPUT_FORMATS)}")


def _memory_message(limits: SqlLimits) -> str:
    return (
        f"the query needs more memory than a query may use ({limits.max_memory} for DuckDB, "
        f"{SQL_PROCESS_DATA_BYTES // 2**20} MiB for its process): select fewer rows or "
        "columns, or aggregate"
    )


def too_large_message(max_bytes: int) -> str:
    """What a user reads when an answer exceeds its byte cap."""
    return (
        f"the answer is larger than {max_bytes} bytes, the cap of one answer "
        f"({env_name('api.sql_max_bytes')}): select fewer rows or columns, or aggregate"
    )


def encode_capped(table: pa.Table, fmt: str, max_bytes: int | None) -> bytes:
    """:func:`encode`, batch by batch, stopping with SqlTooLarge as soon as the encoded
    answer exceeds ``max_bytes`` (JSON and CSV can be several times the Arrow size)."""
    if max_bytes is None:
        return encode(table, fmt)
    sink = pa.BufferOutputStream()
    batches = table.to_batches(max_chunksize=BATCH_ROWS)

    def check() -> None:
        if sink.tell() > max_bytes:
            raise SqlTooLarge(too_large_message(max_bytes))

    if fmt == "json":
        sink.write(b"[")
        first = True
        for batch in batches:
            if batch.num_rows == 0:
                continue
            rows = json.dumps(batch.to_pylist(), default=str)[1:-1]
            sink.write((rows if first else ", " + rows).encode())
            first = False
            check()
        sink.write(b"]")
    elif fmt == "csv":
        with pa_csv.CSVWriter(sink, table.schema) as csv_writer:
            for batch in batches:
                csv_writer.write_batch(batch)
                check()
    elif fmt == "parquet":
        with pq.ParquetWriter(sink, table.schema) as parquet_writer:
            for batch in batches:
                parquet_writer.write_batch(batch)
                check()
    elif fmt == "arrow":
        with pa.ipc.new_stream(sink, table.schema) as ipc_writer:
            for batch in batches:
                ipc_writer.write_batch(batch)
                check()
    else:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(OUTPUT_FORMATS)}")
    check()
    return bytes(sink.getvalue().to_pybytes())


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
