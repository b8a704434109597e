"""The database's views and macros, as code: (re)created from ``sql/`` on connect.

Tables are migrations (``sql/schema_vN.sql``, analytics/store/db.py): data outlives the code
that wrote it. Views and macros hold no data, so they are not frozen into a migration:
``sql/macros.sql`` (the report's formulas: SLO attainment, steady window, cost) and then
``sql/views/*.sql`` in file-name order (a view must follow the views it reads; DuckDB
binds a view when it is created) run as ``CREATE OR REPLACE`` on a read-write connect
whose file holds other views than this version's (or none). They are persistent in the
file, so SQL users, ``tokenbench sql`` and the REST copy (analytics/query/snapshot.py copies
them with the data) see them.

``view_code`` stores the SHA-256 of that SQL; a file whose hash matches is left as it
is (a view edited by hand there stays until the code's views change, or until
``DELETE FROM view_code``). A read-only connection cannot create anything; when the
stored hash differs from this version's, the opener upgrades the file briefly read-write
(analytics/store/db.py), as it does for an older schema.
"""

from __future__ import annotations

import hashlib
from functools import cache
from importlib import resources

import duckdb

from analytics.sql.files import load_sql

__all__ = ["code_sha256", "create_views", "definitions", "stored_sha256"]


@cache
def definitions() -> tuple[tuple[str, str], ...]:
    """(name, SQL) of every macro and view script, in the order they are created."""
    folder = resources.files("analytics.sql").joinpath("views")
    views = sorted(
        (entry.name, entry.read_text("utf-8"))
        for entry in folder.iterdir()
        if entry.name.endswith(".sql")
    )
    return (("macros.sql", load_sql("macros")), *((f"views/{n}", sql) for n, sql in views))


@cache
def code_sha256() -> str:
    """Hash of this version's view and macro SQL (names and text)."""
    digest = hashlib.sha256()
    for name, sql in definitions():
        digest.update(f"{name}\0{sql}\0".encode())
    return digest.hexdigest()


def create_views(con: duckdb.DuckDBPyConnection) -> None:
    """(Re)create every macro and view and record their hash, in the caller's
    transaction (the tables they read must exist)."""
    for _, sql in definitions():
        con.execute(sql)
    # Bookkeeping of the views, not data: created here rather than by a migration.
    con.execute("CREATE TABLE IF NOT EXISTS view_code (sha256 VARCHAR NOT NULL)")
    con.execute("DELETE FROM view_code")
    con.execute("INSERT INTO view_code VALUES (?)", [code_sha256()])


def stored_sha256(con: duckdb.DuckDBPyConnection) -> str | None:
    """The hash of the views the file holds (None before any were recorded)."""
    try:
        rows = con.execute("SELECT max(sha256) FROM view_code").fetchall()
    except duckdb.CatalogException:
        return None
    return rows[0][0] if rows else None
