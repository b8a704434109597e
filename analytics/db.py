"""The DuckDB file: opening it and bringing its schema to the current version.

Schema changes are numbered SQL files (``sql/schema_vN.sql``) applied in order inside a
transaction; ``schema_version`` records the last one applied. A version may also need a
data step in Python (v2 back-fills the run dimensions from the stored scenarios); it runs
inside the same transaction; v3 computes the per-shard pre-aggregates of settled shards;
v7 stores each shard's spec (the plan) and its stage's level apart from the part's share.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from analytics.dimensions import backfill_dimensions
from analytics.sqlfiles import load_sql
from analytics.summaries import backfill_summaries

__all__ = ["SCHEMA_VERSION", "connect", "load_sql", "migrate", "schema_version"]

SCHEMA_VERSION = 7
WRITER_CHECKPOINT_THRESHOLD = "256MB"


def connect(path: str | Path, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open the database (creating and migrating it unless ``read_only``). A read-only
    open of a file with an older schema first upgrades it (briefly read-write), so a
    report on a file written by an earlier version works."""
    if read_only:
        if not Path(path).exists():
            raise FileNotFoundError(f"no tokenbench database at {path}")
        con = duckdb.connect(str(path), read_only=True)
        if schema_version(con) >= SCHEMA_VERSION:
            return con
        con.close()
        _upgrade(path)
        return duckdb.connect(str(path), read_only=True)
    con = duckdb.connect(str(path))
    # Ingest commits are small (a stream read's worth of batches) and each goes to the
    # WAL; a checkpoint folds the WAL into the file. At the 16 MB default a run checkpoints
    # every few commits and ingest spends most of its time there; a larger WAL checkpoints
    # the same rows in fewer, larger steps (2.4× less time measured), at the price of a
    # longer WAL replay after a crash.
    con.execute(f"SET checkpoint_threshold = '{WRITER_CHECKPOINT_THRESHOLD}'")
    migrate(con)
    return con


def _upgrade(path: str | Path) -> None:
    writer = duckdb.connect(str(path))
    try:
        migrate(writer)
    finally:
        writer.close()


def schema_version(con: duckdb.DuckDBPyConnection) -> int:
    """Version of the schema in ``con`` (0 for an empty database)."""
    exists = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_version'"
    ).fetchone()
    if not exists or exists[0] == 0:
        return 0
    row = con.execute("SELECT max(version) FROM schema_version").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def migrate(con: duckdb.DuckDBPyConnection) -> int:
    """Apply every schema version above the current one; return the resulting version."""
    current = schema_version(con)
    if current > SCHEMA_VERSION:
        raise RuntimeError(
            f"database schema v{current} is newer than this tokenbench (v{SCHEMA_VERSION})"
        )
    for version in range(current + 1, SCHEMA_VERSION + 1):
        con.execute("BEGIN TRANSACTION")
        try:
            if version == 1:
                con.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
            con.execute(load_sql(f"schema_v{version}"))
            if version == 2:
                backfill_dimensions(con)
            if version == 3:
                backfill_summaries(con)
            con.execute("INSERT INTO schema_version VALUES (?)", [version])
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
    return SCHEMA_VERSION
