"""The DuckDB file: opening it and bringing its schema to the current version.

Schema changes are numbered SQL files (``sql/schema_vN.sql``) applied in order inside a
transaction; ``schema_version`` records the last one applied. A version may also need a
data step in Python (v2 back-fills the run dimensions from the stored scenarios); it runs
inside the same transaction.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import duckdb

from analytics.dimensions import backfill_dimensions

SCHEMA_VERSION = 2


def load_sql(name: str) -> str:
    """Text of ``analytics/sql/<name>.sql``."""
    return resources.files("analytics").joinpath("sql", f"{name}.sql").read_text("utf-8")


def connect(path: str | Path, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open the database (creating and migrating it unless ``read_only``)."""
    if read_only:
        if not Path(path).exists():
            raise FileNotFoundError(f"no tokenbench database at {path}")
        return duckdb.connect(str(path), read_only=True)
    con = duckdb.connect(str(path))
    migrate(con)
    return con


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
            con.execute("INSERT INTO schema_version VALUES (?)", [version])
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
    return SCHEMA_VERSION
