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
3. The names: functions that show the server's files or settings, which the locked
   connection still answers (``duckdb_settings()``, ``current_setting(...)``,
   ``duckdb_databases()``, ``pragma_database_list``, ``duckdb_extensions()``...: see
   :data:`DENIED_FUNCTIONS`), and those that run SQL given as a string (``query(...)``,
   ``query_table(...)``, which would hide a name from this check), are refused by name,
   found among the statement's identifiers by DuckDB's own tokenizer.

Errors are reported as a class (``kind``) and DuckDB's first line, with any server path
in it replaced by ``<path>``; an answer that cannot be encoded in the asked format is a
classified error too, never a Python exception's text.

A timer interrupts a statement that runs longer than the timeout; the result is streamed
as Arrow record batches and cut after ``max_rows`` rows (``truncated`` says so, and
``total_rows`` how many there were when asked to count them). With a ``max_bytes`` cap,
reading stops as soon as the batches read so far exceed it (and :func:`encode_capped`
stops encoding likewise), so an answer never grows past the cap plus one small batch; a
query that needs more memory than ``max_memory`` is refused. An export
(:func:`export_query`) is not cut: it writes every row to its sink batch by batch, or
stops with :class:`SqlTooManyRows` past an explicit row cap.

The connection is the caller's process's own read-only handle. DuckDB lets one process
hold a file for writing; while a run writes to it, other processes cannot open it, and a
process that holds a read-write connection to the file cannot open a second one with a
different configuration, so a server that ingests must run user SQL in another process
(or on a copy) — which also keeps a heavy query from stalling ingestion.
"""

from __future__ import annotations

import io
import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import duckdb
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from analytics.store.db import is_current, schema_version, upgrade
from scenarios.errors import BadInput, Refused, Timeout, Unavailable
from scenarios.limits import SQL_PROCESS_DATA_BYTES
from scenarios.settings import env_name

ALLOWED_STATEMENTS = frozenset({duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN})
# Functions (and table functions) whose answer shows the server: file paths of the
# database, its temporary files, extensions and secrets, the home directory, settings.
DENIED_FUNCTIONS = frozenset({
    "current_setting", "duckdb_settings", "duckdb_databases", "pragma_database_list",
    "duckdb_extensions", "duckdb_extension_repositories", "duckdb_temporary_files",
    "duckdb_external_file_cache", "duckdb_secrets", "which_secret", "duckdb_logs",
    "duckdb_log_contexts",
})  # fmt: skip
# Table functions that run a query given as a string: the names in it escape the check.
STRING_QUERIES = frozenset({"query", "query_table"})
# An absolute path in an error message (two segments at least, so that an operator such
# as '/' or a ratio stays): the server's files are nobody's business.
_PATH = re.compile(r"(?<![\w.:/])(?:/[\w.@~+-]+){2,}/?|\b[A-Za-z]:\\[^\s\"']+")
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
    """Rows of a query (at most ``max_rows``), whether more were cut off, and how many
    rows the answer had (None when they were not all counted)."""

    table: pa.Table
    truncated: bool
    elapsed_s: float
    total_rows: int | None = None


@dataclass(frozen=True, slots=True)
class ExportResult:
    """How many rows an export wrote, and in how long."""

    rows: int
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


class SqlTooManyRows(SqlTooLarge):
    """An export's answer has more rows than its cap: nothing is cut silently."""

    def __init__(self, max_rows: int) -> None:
        super().__init__(f"the answer has more than {max_rows:,} rows, the export's row cap")
        self.max_rows = max_rows


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
    as a report does: analytics/store/db.py), so user SQL reads this version's views."""
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
    check_names(sql)


def check_names(sql: str) -> None:
    """Refuse a query naming a function of :data:`DENIED_FUNCTIONS` anywhere as an
    identifier (quoted or not, qualified or not), or calling one of
    :data:`STRING_QUERIES`."""
    try:
        tokens = duckdb.tokenize(sql)
    except duckdb.Error as exc:
        raise SqlError(_first_line(exc)) from None
    ends = [start for start, _ in tokens[1:]] + [len(sql)]
    texts = [
        (sql[start:end].strip(), kind) for (start, kind), end in zip(tokens, ends, strict=True)
    ]
    for index, (text, kind) in enumerate(texts):
        if kind != duckdb.token_type.identifier:
            continue
        name = text.strip('"').lower()
        if name in DENIED_FUNCTIONS:
            raise SqlRefused(
                f"{name} is not available to user SQL: it shows the server's settings and "
                "files; query the results' tables and views instead"
            )
        following = texts[index + 1][0] if index + 1 < len(texts) else ""
        if name in STRING_QUERIES and following.startswith("("):
            raise SqlRefused(
                f"{name}() is not available to user SQL: write the query itself instead"
            )


def run_query(
    path: str | Path, sql: str, limits: SqlLimits | None = None, count_all: bool = False
) -> QueryResult:
    """Run one user query against the database at ``path`` under ``limits`` (``count_all``:
    as :func:`run_on`)."""
    limits = limits or SqlLimits()
    con = open_locked(path, limits)
    try:
        return run_on(con, sql, limits, count_all)
    finally:
        con.close()


def run_on(
    con: duckdb.DuckDBPyConnection, sql: str, limits: SqlLimits, count_all: bool = False
) -> QueryResult:
    """Run one user query on a connection from :func:`open_locked`: at most
    ``limits.max_rows`` rows. With ``count_all``, the rows past the cap are read (within
    the timeout) and counted, not kept: ``total_rows`` says how many there were."""
    check_statement(con, sql)
    started = time.perf_counter()
    with _guarded(con, limits):
        reader = con.sql(sql).to_arrow_reader(min(limits.max_rows + 1, BATCH_ROWS))
        batches: list[pa.RecordBatch] = []
        kept = rows = size = 0
        for batch in reader:
            rows += batch.num_rows
            if kept <= limits.max_rows:
                batches.append(batch)
                kept += batch.num_rows
                size += batch.nbytes
                if limits.max_bytes is not None and size > limits.max_bytes:
                    raise SqlTooLarge(too_large_message(limits.max_bytes))
            if rows > limits.max_rows and not count_all:
                break
        table = pa.Table.from_batches(batches, schema=reader.schema)
    truncated = table.num_rows > limits.max_rows
    if truncated:
        table = table.slice(0, limits.max_rows)
    total = rows if count_all or not truncated else None
    return QueryResult(table, truncated, time.perf_counter() - started, total)


def export_on(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    fmt: str,
    sink: Any,
    limits: SqlLimits,
    max_rows: int | None = None,
) -> ExportResult:
    """Write every row of one user query to ``sink`` (a binary file or Arrow stream) as
    ``fmt``, batch by batch, holding one batch at a time. With ``max_rows``, an answer
    with more rows stops with :class:`SqlTooManyRows` instead of being cut."""
    check_statement(con, sql)
    started = time.perf_counter()
    rows = 0
    with _guarded(con, limits):
        reader = con.sql(sql).to_arrow_reader(BATCH_ROWS)
        encoder = BatchEncoder(sink, reader.schema, fmt)
        try:
            for batch in reader:
                rows += batch.num_rows
                if max_rows is not None and rows > max_rows:
                    raise SqlTooManyRows(max_rows)
                encoder.write(batch)
        except BaseException:
            encoder.abort()
            raise
        encoder.close()
    return ExportResult(rows, time.perf_counter() - started)


def export_query(
    path: str | Path,
    sql: str,
    fmt: str,
    sink: Any,
    limits: SqlLimits | None = None,
    max_rows: int | None = None,
) -> ExportResult:
    """:func:`export_on` on a locked connection to the database at ``path``."""
    limits = limits or SqlLimits()
    con = open_locked(path, limits)
    try:
        return export_on(con, sql, fmt, sink, limits, max_rows)
    finally:
        con.close()


@contextmanager
def _guarded(con: duckdb.DuckDBPyConnection, limits: SqlLimits) -> Iterator[None]:
    """The statement timeout, and DuckDB's and Arrow's errors as the SqlError tree."""
    timer = threading.Timer(limits.timeout_s, con.interrupt)
    timer.daemon = True
    timer.start()
    try:
        yield
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


# What converting a value for a format raises when the value does not fit it.
ENCODING_ERRORS = (
    OverflowError, ArithmeticError, ValueError, TypeError,
    pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError,
)  # fmt: skip


@contextmanager
def encodable(fmt: str) -> Iterator[None]:
    """Encoding errors as a SqlError that says what to do: a value Python's or the
    format's types cannot hold (``test_all_types()``'s extreme dates and intervals, an
    interval in Parquet) is the user's to fix, said without the library's internals."""
    try:
        yield
    except SqlError:
        raise
    except ENCODING_ERRORS:
        raise SqlError(UNENCODABLE.format(fmt=fmt)) from None


class BatchEncoder:
    """Record batches of one schema written to a binary sink as CSV, JSON (one array of
    objects, as :func:`encode` writes it), Parquet or an Arrow IPC stream, one batch at a
    time: an answer of any size is written without being held whole."""

    def __init__(self, sink: Any, schema: pa.Schema, fmt: str) -> None:
        self._sink = sink
        self._fmt = fmt
        self._first = True
        self._writer: Any = None
        with encodable(fmt):
            self._open(schema)

    def _open(self, schema: pa.Schema) -> None:
        fmt, sink = self._fmt, self._sink
        if fmt == "csv":
            self._writer = pa_csv.CSVWriter(sink, schema)
        elif fmt == "parquet":
            self._writer = pq.ParquetWriter(sink, schema)
        elif fmt == "arrow":
            self._writer = pa.ipc.new_stream(sink, schema)
        elif fmt == "json":
            sink.write(b"[")
        else:
            raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(OUTPUT_FORMATS)}")

    def write(self, batch: pa.RecordBatch) -> None:
        """Append one batch; SqlError when a value cannot be written in the format."""
        with encodable(self._fmt):
            if self._writer is not None:
                self._writer.write_batch(batch)
            elif batch.num_rows:
                rows = json.dumps(batch.to_pylist(), default=str)[1:-1]
                self._sink.write((rows if self._first else ", " + rows).encode())
                self._first = False

    def close(self) -> None:
        """End the document (the sink itself stays open)."""
        if self._writer is not None:
            self._writer.close()
        else:
            self._sink.write(b"]")

    def abort(self) -> None:
        """Stop without ending the document: a JSON answer stays unclosed, so that what
        was written reads as cut short. (Arrow's writers are closed, while the sink is
        open, so that none of them writes to it later.)"""
        if self._writer is not None:
            with suppress(pa.ArrowException, OSError, ValueError):
                self._writer.close()


def encode(table: pa.Table, fmt: str) -> bytes:
    """The table as CSV, JSON (an array of objects), Parquet or Arrow IPC stream bytes;
    SqlError when a value cannot be written in ``fmt``."""
    if fmt not in OUTPUT_FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(OUTPUT_FORMATS)}")
    try:
        return _encode(table, fmt)
    except ENCODING_ERRORS:
        raise SqlError(UNENCODABLE.format(fmt=fmt)) from None


def _encode(table: pa.Table, fmt: str) -> bytes:
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

    def check() -> None:
        if sink.tell() > max_bytes:
            raise SqlTooLarge(too_large_message(max_bytes))

    encoder = BatchEncoder(sink, table.schema, fmt)
    for batch in table.to_batches(max_chunksize=BATCH_ROWS):
        encoder.write(batch)
        check()
    encoder.close()
    check()
    return bytes(sink.getvalue().to_pybytes())


def _first_line(exc: BaseException) -> str:
    """DuckDB's (or Arrow's) first line of ``exc``, server paths replaced by ``<path>``."""
    text = str(exc).splitlines()[0] if str(exc) else "the query failed"
    return public_message(text)


def public_message(text: str) -> str:
    """``text`` with every absolute path in it replaced by ``<path>``."""
    return _PATH.sub("<path>", text)


UNENCODABLE = (
    "the answer holds a value the {fmt} format cannot represent (such as a date or "
    "interval beyond the years 1 to 9999, or an interval in Parquet): cast that column "
    "to VARCHAR, or ask for the arrow format, which holds every type"
)
