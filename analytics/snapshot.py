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
            finally:
                cursor.execute(f"DETACH {alias}")
            os.replace(partial, self.path)
        finally:
            cursor.close()
            with contextlib.suppress(FileNotFoundError):
                partial.unlink()
        self._taken_at = taken_at
        return SnapshotInfo(self.path, taken_at, time.time() - taken_at)
