"""The DuckDB file: opening it, bringing its tables to the current version, its views to
the current code.

Tables are migrations: numbered SQL files (``sql/schema_vN.sql``) that create and alter
tables, and only tables; ``schema_version`` records the last one applied. v1 also creates
``request_records`` from the Arrow record schema (analytics/store/record_table.py). Views and
macros are code (analytics/store/views.py): every read-write connect creates or replaces them
from ``sql/macros.sql`` and ``sql/views/``, after the migrations, and records their hash.

An upgrade is one transaction: every pending migration, then the views, then the data
steps that fill what a migration added to existing runs (v2 back-fills the run
dimensions from the stored scenarios, v3 the per-shard pre-aggregates of settled shards,
v8 their most frequent error messages).
The data steps run last, so they read the current tables through the current views.

A read-only open cannot write: when the file's schema is older or its views are not this
version's, it upgrades the file first (briefly read-write), so a report, ``tokenbench
sql`` or any reader of a file written by another version sees the current definitions.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from analytics.sql.files import load_sql
from analytics.store.dimensions import backfill_dimensions
from analytics.store.record_table import request_records_sql
from analytics.store.summaries import backfill_error_messages, backfill_summaries
from analytics.store.views import code_sha256, create_views, stored_sha256

__all__ = [
    "SCHEMA_VERSION",
    "connect",
    "create_at_version",
    "is_current",
    "load_sql",
    "migrate",
    "schema_version",
    "upgrade",
]

SCHEMA_VERSION = 21
WRITER_CHECKPOINT_THRESHOLD = "256MB"


def connect(
    path: str | Path, read_only: bool = False, memory_limit: str | None = None
) -> duckdb.DuckDBPyConnection:
    """Open the database (creating and migrating it, and recreating its views, unless
    ``read_only``). A read-only open of a file with an older schema or other views first
    upgrades it (briefly read-write), so a report on a file written by another version
    works. ``memory_limit`` (e.g. ``2GB``) bounds a writer's memory (DuckDB's default:
    80 % of the machine's)."""
    if read_only:
        if not Path(path).exists():
            raise FileNotFoundError(f"no tokenbench database at {path}")
        con = duckdb.connect(str(path), read_only=True)
        if is_current(con):
            return con
        con.close()
        upgrade(path)
        return duckdb.connect(str(path), read_only=True)
    con = duckdb.connect(str(path))
    # Ingest commits are small (a stream read's worth of batches) and each goes to the
    # WAL; a checkpoint folds the WAL into the file. At the 16 MB default a run checkpoints
    # every few commits and ingest spends most of its time there; a larger WAL checkpoints
    # the same rows in fewer, larger steps (2.4× less time measured), at the price of a
    # longer WAL replay after a crash.
    con.execute(f"SET checkpoint_threshold = '{WRITER_CHECKPOINT_THRESHOLD}'")
    # A checkpoint's vacuum merges adjacent partially filled row groups by rewriting them
    # (decompress, recompress, write again). Ingest leaves one such group per large
    # commit, so each checkpoint rewrote rows already stored: 65,536-row batches ingested
    # slower than 1,024-row ones (benchmarks/ingest.py). Off, a table keeps a partly filled
    # group per large commit; the record buffer commits whole row groups, so few are left.
    con.execute("SET max_vacuum_tasks = 0")
    if memory_limit is not None:
        con.execute("SET memory_limit = ?", [memory_limit])
    migrate(con)
    return con


def is_current(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the file needs no upgrade: this schema version and this version's views.
    A newer schema counts as current (its own version's views are left alone)."""
    version = schema_version(con)
    if version != SCHEMA_VERSION:
        return version > SCHEMA_VERSION
    return stored_sha256(con) == code_sha256()


def upgrade(path: str | Path) -> None:
    """Migrate the file at ``path`` and recreate its views (a brief read-write open)."""
    writer = duckdb.connect(str(path))
    try:
        migrate(writer)
    finally:
        writer.close()


def schema_version(con: duckdb.DuckDBPyConnection) -> int:
    """Version of the schema in ``con`` (0 for an empty database)."""
    # fetchall: a result left unread would block the caller's next relational query.
    exists = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_version'"
    ).fetchall()
    if not exists or exists[0][0] == 0:
        return 0
    rows = con.execute("SELECT max(version) FROM schema_version").fetchall()
    return int(rows[0][0]) if rows and rows[0][0] is not None else 0


def migrate(con: duckdb.DuckDBPyConnection) -> int:
    """Apply every schema version above the current one, (re)create the views and macros,
    back-fill what the applied versions added; return the resulting version."""
    current = schema_version(con)
    if current > SCHEMA_VERSION:
        raise RuntimeError(
            f"database schema v{current} is newer than this tokenbench (v{SCHEMA_VERSION})"
        )
    # Before the transaction: a failed lookup (no view_code yet) would abort it.
    views_stale = current < SCHEMA_VERSION or stored_sha256(con) != code_sha256()
    con.execute("BEGIN TRANSACTION")
    try:
        _apply_tables(con, current, SCHEMA_VERSION)
        # Recreating binds every view again (≈ 100 ms for the summary views): done when the
        # schema moved or this version's view SQL differs from the file's, not on each open.
        if views_stale:
            create_views(con)
        if current < 2:
            backfill_dimensions(con)
        if current < 3:
            backfill_summaries(con)  # the v8 messages with the rest
        elif current < 8:
            backfill_error_messages(con)
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    return SCHEMA_VERSION


def _apply_tables(con: duckdb.DuckDBPyConnection, current: int, target: int) -> None:
    """The table migrations above ``current`` up to ``target`` (no views, no back-fills)."""
    for version in range(current + 1, target + 1):
        if version == 1:
            con.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
            con.execute(request_records_sql())
        con.execute(load_sql(f"schema_v{version}"))
        con.execute("INSERT INTO schema_version VALUES (?)", [version])


def create_at_version(con: duckdb.DuckDBPyConnection, version: int) -> None:
    """Give the empty database ``con`` the tables of schema ``version`` (1..current), as
    a file written by that version had them: no views. A later :func:`migrate` brings it
    to the current schema as it would that file (run bundles of older versions are loaded
    into such a scratch database first, analytics/store/bundles.py). ``request_records``
    is created from the current record schema, as every file's v1 is (record_table.py)."""
    if not 1 <= version <= SCHEMA_VERSION:
        raise ValueError(f"no schema v{version} (1..{SCHEMA_VERSION})")
    _apply_tables(con, 0, version)
