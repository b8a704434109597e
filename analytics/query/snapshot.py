"""A read-only copy of the results database for user SQL, refreshed from the writer.

DuckDB lets one process hold a file for writing, and no other process may open it while
it does — not even read-only. The control plane holds the writer, and user SQL must run
in another process (its configuration locked, killable, unable to stall ingestion). So
the writer copies the database into a separate file (``COPY FROM DATABASE`` into an
attached file, on a cursor of its own: MVCC gives the copy one consistent transaction
while ingestion goes on), detaches it and renames it over the previous copy. A query
process opens the copy read-only; one that has the old copy open keeps reading that
inode. Queries see the data as of the copy: ``age_s`` says how old it is, and a copy
older than the caller accepts is refreshed before the query runs.

The copy is what untrusted SQL reads, so what only the control plane may read is
rewritten in it before it is renamed into place (:func:`scrub_copy`): a schedule's
``webhook_url`` is a credential (user:password, query token, a hook's secret path) and
the copy holds only its public form (scenarios/security/redaction.py, ``public_url``), in a table
written anew, so that no page of the copy's live tables holds the original.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import duckdb

from scenarios.security.redaction import public_url


@dataclass(frozen=True, slots=True)
class SnapshotInfo:
    """Where the copy is and how old its data is."""

    path: Path
    taken_at: float  # time.time() when the copy's transaction began
    age_s: float


class SqlSnapshot:
    """The copy of one database file next to it (``<name>.sql-snapshot.duckdb``)."""

    def __init__(self, database: str | Path) -> None:
        database = Path(database)
        self.path = database.with_name(f"{database.name}.sql-snapshot.duckdb")
        self._lock = threading.Lock()
        self._taken_at: float | None = None

    @classmethod
    def of(cls, writer: duckdb.DuckDBPyConnection) -> SqlSnapshot:
        """The copy of the file ``writer`` has open."""
        row = writer.execute(
            "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
        ).fetchone()
        if row is None or not row[0]:
            raise RuntimeError("the writer connection is not backed by a file")
        return cls(str(row[0]))

    def refresh(self, writer: duckdb.DuckDBPyConnection) -> SnapshotInfo:
        """Copy the database of ``writer`` now (one copy at a time)."""
        with self._lock:
            return self._refresh(writer)

    def ensure(self, writer: duckdb.DuckDBPyConnection, max_age_s: float) -> SnapshotInfo:
        """The copy, refreshed first if it is missing or older than ``max_age_s``."""
        with self._lock:
            if self._taken_at is not None and self.path.exists():
                age = time.time() - self._taken_at
                if age <= max_age_s:
                    return SnapshotInfo(self.path, self._taken_at, age)
            return self._refresh(writer)

    def _refresh(self, writer: duckdb.DuckDBPyConnection) -> SnapshotInfo:
        alias = f"sql_snapshot_{uuid.uuid4().hex[:12]}"
        partial = self.path.with_name(f"{self.path.name}.{alias}.tmp")
        cursor = writer.cursor()
        try:
            source = cursor.execute("SELECT current_database()").fetchone()
            if source is None:
                raise RuntimeError("the writer connection has no current database")
            taken_at = time.time()
            # Identifiers: the alias is ours, the source name is DuckDB's own (quoted).
            cursor.execute("ATTACH ? AS " + alias, [str(partial)])
            try:
                quoted = '"' + str(source[0]).replace('"', '""') + '"'
                cursor.execute(f"COPY FROM DATABASE {quoted} TO {alias}")
                scrub_copy(cursor, alias)
            finally:
                cursor.execute(f"DETACH {alias}")
            os.replace(partial, self.path)
        finally:
            cursor.close()
            with contextlib.suppress(FileNotFoundError):
                partial.unlink()
        self._taken_at = taken_at
        return SnapshotInfo(self.path, taken_at, time.time() - taken_at)


def scrub_copy(cursor: duckdb.DuckDBPyConnection, alias: str) -> None:
    """Replace, in the attached copy ``alias``, every schedule's ``webhook_url`` by its
    public form (the table is rewritten, not updated in place)."""
    found = cursor.execute(
        "SELECT 1 FROM duckdb_columns() WHERE database_name = ? AND schema_name = 'main' "
        "AND table_name = 'schedules' AND column_name = 'webhook_url'",
        [alias],
    ).fetchone()
    if found is None:
        return  # not a database with schedules (or one older than them)
    # The alias is ours (sql_snapshot_<hex>), never a user's text.
    table = f"{alias}.main.schedules"
    query = f"SELECT DISTINCT webhook_url FROM {table} WHERE webhook_url NOT NULL"  # noqa: S608
    urls = [str(row[0]) for row in cursor.execute(query).fetchall()]
    if not urls:
        return
    shown = [public_url(url) for url in urls]
    rewrite = (
        f"CREATE OR REPLACE TABLE {table} AS SELECT * REPLACE "  # noqa: S608
        "(map_extract_value(MAP(?::VARCHAR[], ?::VARCHAR[]), webhook_url) AS webhook_url) "
        f"FROM {table}"
    )
    cursor.execute(rewrite, [urls, shown])
