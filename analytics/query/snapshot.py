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

**One copy per scope** (docs/teams.md, "SQL sees what you may see"): what a query can
read is decided here, in the copy the query process opens, never by filtering its
answer. An admin's copy holds everything. A team's copy is built from the schema alone
(``COPY FROM DATABASE ... (SCHEMA)``: tables, views, macros; no row) and then filled
table by table with only the rows the team may read (:func:`classify`): tables with a
``run_id`` keep the rows of visible runs and sessions, tables keyed by a schedule,
dataset or scenario the rows of visible ones, the spend ledger and the run queue the
team's own rows; the admin tables (tokens, audit log, teams, owners) are dropped, and
so is every table no rule classifies (default deny: a table added later is invisible
to teams until it is classified) and every sequence (its value counts other teams'
rows). Rows a team may not read are never written to its copy's file. At most
``MAX_SCOPES`` copies are kept, the least recently used removed: the disk cost is at
most ``MAX_SCOPES`` copies, each no larger than the whole database.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import duckdb

from analytics.sql.results import first_row
from scenarios.security.redaction import public_url

# Copies kept at once (one per scope: admin, and each team that queried lately).
MAX_SCOPES = 8

# A condition (trusted SQL and its parameters) that holds for the objects of a kind
# ("run", "session", "dataset", "schedule", "scenario") whose id is in a column.
Visible = Callable[[str, str], tuple[str, list[object]]]


class Rows(StrEnum):
    """What a team's copy keeps of a table."""

    ALL = "all"  # holds nothing of any team (schema version, view hashes)
    DROP = "drop"  # admin only: tokens, audit log, teams, owners
    TEAM = "team"  # the team's own rows (column ``team``)
    OBJECT = "object"  # the rows of objects the team may read (column names the id)


@dataclass(frozen=True, slots=True)
class TableRule:
    """How one table is scoped: ``rows``, and for OBJECT the kind and id column."""

    rows: Rows
    kind: str | None = None
    column: str | None = None


# Tables named here follow their rule; any other table is classified by its columns
# (below); one that matches nothing is dropped for teams (default deny).
NAMED_RULES: dict[str, TableRule] = {
    "schema_version": TableRule(Rows.ALL),
    "view_code": TableRule(Rows.ALL),
    "api_tokens": TableRule(Rows.DROP),
    "audit_log": TableRule(Rows.DROP),
    "teams": TableRule(Rows.DROP),
    "object_owners": TableRule(Rows.DROP),
    "dataset_users": TableRule(Rows.DROP),
    "spend_ledger": TableRule(Rows.TEAM),
    "run_queue": TableRule(Rows.TEAM),
    # Who sent OTLP spans, and what became of them (docs/traces.md): the team's own.
    "server_span_receipts": TableRule(Rows.TEAM),
    "api_scenarios": TableRule(Rows.OBJECT, "scenario", "scenario_id"),
    "datasets": TableRule(Rows.OBJECT, "dataset", "dataset_id"),
    # A schedule's fires and webhooks name runs too: they follow their schedule.
    "schedules": TableRule(Rows.OBJECT, "schedule", "schedule_id"),
    "schedule_fires": TableRule(Rows.OBJECT, "schedule", "schedule_id"),
    "schedule_webhooks": TableRule(Rows.OBJECT, "schedule", "schedule_id"),
}
# A table with one of these columns (first match) keeps the rows of readable objects.
KEY_COLUMNS = (
    ("run_id", "run"),
    ("schedule_id", "schedule"),
    ("dataset_id", "dataset"),
    ("scenario_id", "scenario"),
)


def classify(table: str, columns: list[str]) -> TableRule | None:
    """The rule of a table with ``columns``, or None: not classified (dropped for teams)."""
    if table in NAMED_RULES:
        return NAMED_RULES[table]
    for column, kind in KEY_COLUMNS:
        if column in columns:
            return TableRule(Rows.OBJECT, kind, column)
    return None


@dataclass(frozen=True, slots=True)
class SqlScope:
    """Whose copy: ``admin`` (everything), or a team with its read rule ``visible``."""

    key: str  # part of the copy's file name: "admin" or "team-<hex>"
    team: str | None = None
    visible: Visible | None = None

    @property
    def admin(self) -> bool:
        """Whether the copy holds everything."""
        return self.team is None

    @classmethod
    def of_team(cls, team: str, visible: Visible) -> SqlScope:
        """The scope of ``team`` (any name: the file name holds a hash of it)."""
        return cls("team-" + hashlib.sha256(team.encode()).hexdigest()[:16], team, visible)


ADMIN_SCOPE = SqlScope("admin")


@dataclass(frozen=True, slots=True)
class SnapshotInfo:
    """Where the copy is and how old its data is."""

    path: Path
    taken_at: float  # time.time() when the copy's transaction began
    age_s: float


def database_path(writer: duckdb.DuckDBPyConnection) -> Path:
    """The file ``writer`` has open."""
    row = first_row(
        writer.execute(
            "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
        )
    )
    if row is None or not row[0]:
        raise RuntimeError("the writer connection is not backed by a file")
    return Path(str(row[0]))


def _teams_state(cursor: duckdb.DuckDBPyConnection) -> str:
    """What the read rule depends on beyond the owner rows (each written once, when
    its object is created): the teams' visibility settings. A copy made under other
    settings is made again."""
    found = first_row(
        cursor.execute(
            "SELECT 1 FROM duckdb_tables() WHERE database_name = current_database() "
            "AND schema_name = 'main' AND table_name = 'teams'"
        )
    )
    if found is None:
        return ""
    row = first_row(
        cursor.execute("SELECT string_agg(team || '=' || visibility, ',' ORDER BY team) FROM teams")
    )
    return "" if row is None or row[0] is None else str(row[0])


class SqlSnapshot:
    """The copy of one database file for one scope, next to it
    (``<name>.sql-snapshot.duckdb`` for admins, ``<name>.sql-snapshot.<scope>.duckdb``)."""

    def __init__(self, database: str | Path, scope: SqlScope = ADMIN_SCOPE) -> None:
        database = Path(database)
        suffix = "" if scope.admin else f".{scope.key}"
        self.path = database.with_name(f"{database.name}.sql-snapshot{suffix}.duckdb")
        self.scope = scope
        self._lock = threading.Lock()
        self._taken_at: float | None = None
        self._teams_state: str | None = None

    @classmethod
    def of(cls, writer: duckdb.DuckDBPyConnection, scope: SqlScope = ADMIN_SCOPE) -> SqlSnapshot:
        """The copy of the file ``writer`` has open."""
        return cls(database_path(writer), scope)

    def discard(self) -> None:
        """Remove the copy (a query that has it open keeps reading it)."""
        with self._lock:
            self._taken_at = None
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    def refresh(self, writer: duckdb.DuckDBPyConnection) -> SnapshotInfo:
        """Copy the database of ``writer`` now (one copy at a time)."""
        with self._lock:
            return self._refresh(writer)

    def ensure(self, writer: duckdb.DuckDBPyConnection, max_age_s: float) -> SnapshotInfo:
        """The copy, refreshed first if it is missing or older than ``max_age_s``."""
        with self._lock:
            if self._taken_at is not None and self.path.exists() and self._same_rules(writer):
                age = time.time() - self._taken_at
                if age <= max_age_s:
                    return SnapshotInfo(self.path, self._taken_at, age)
            return self._refresh(writer)

    def _same_rules(self, writer: duckdb.DuckDBPyConnection) -> bool:
        if self.scope.admin:
            return True
        cursor = writer.cursor()
        try:
            return _teams_state(cursor) == self._teams_state
        finally:
            cursor.close()

    def _refresh(self, writer: duckdb.DuckDBPyConnection) -> SnapshotInfo:
        alias = f"sql_snapshot_{uuid.uuid4().hex[:12]}"
        partial = self.path.with_name(f"{self.path.name}.{alias}.tmp")
        cursor = writer.cursor()
        try:
            source = first_row(cursor.execute("SELECT current_database()"))
            if source is None:
                raise RuntimeError("the writer connection has no current database")
            taken_at = time.time()
            teams_state = _teams_state(cursor)
            # Identifiers: the alias is ours, the source name is DuckDB's own (quoted).
            cursor.execute("ATTACH ? AS " + alias, [str(partial)])
            try:
                quoted = '"' + str(source[0]).replace('"', '""') + '"'
                if self.scope.admin:
                    cursor.execute(f"COPY FROM DATABASE {quoted} TO {alias}")
                else:
                    cursor.execute(f"COPY FROM DATABASE {quoted} TO {alias} (SCHEMA)")
                    fill_scoped(cursor, quoted, alias, self.scope)
                scrub_copy(cursor, alias)
            finally:
                cursor.execute(f"DETACH {alias}")
            os.replace(partial, self.path)
        finally:
            cursor.close()
            with contextlib.suppress(FileNotFoundError):
                partial.unlink()
        self._taken_at = taken_at
        self._teams_state = teams_state
        return SnapshotInfo(self.path, taken_at, time.time() - taken_at)


class SqlSnapshots:
    """The copies of one database, one per scope, the ``max_scopes`` most recently used
    kept (an older one's file is removed; it is made again when its scope queries)."""

    def __init__(self, database: str | Path, max_scopes: int = MAX_SCOPES) -> None:
        self.database = Path(database)
        self.max_scopes = max_scopes
        self._lock = threading.Lock()
        self._copies: OrderedDict[str, SqlSnapshot] = OrderedDict()
        # Team copies left by an earlier process: never read again, so removed.
        pattern = f"{self.database.name}.sql-snapshot.team-*.duckdb"
        for stale in self.database.parent.glob(pattern):
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()

    @classmethod
    def of(cls, writer: duckdb.DuckDBPyConnection, max_scopes: int = MAX_SCOPES) -> SqlSnapshots:
        """The copies of the file ``writer`` has open."""
        return cls(database_path(writer), max_scopes)

    def ensure(
        self, writer: duckdb.DuckDBPyConnection, scope: SqlScope, max_age_s: float
    ) -> SnapshotInfo:
        """The copy of ``scope``, refreshed first if missing or older than ``max_age_s``."""
        with self._lock:
            copy = self._copies.pop(scope.key, None) or SqlSnapshot(self.database, scope)
            self._copies[scope.key] = copy
            evicted = []
            while len(self._copies) > self.max_scopes:
                evicted.append(self._copies.popitem(last=False)[1])
        for old in evicted:
            old.discard()
        return copy.ensure(writer, max_age_s)

    def paths(self) -> list[Path]:
        """The copies kept, least recently used first."""
        with self._lock:
            return [copy.path for copy in self._copies.values()]


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def fill_scoped(
    cursor: duckdb.DuckDBPyConnection, source: str, alias: str, scope: SqlScope
) -> None:
    """Fill the attached copy ``alias`` (its schema only, no row yet) from the database
    ``source`` (quoted) with the rows ``scope`` may read; drop the tables it may not read
    at all and every sequence. The read rule's conditions name the owner tables
    unqualified: they read the source, the writer's current database."""
    assert scope.visible is not None
    assert scope.team is not None
    tables = cursor.execute(
        "SELECT table_name, list(column_name ORDER BY column_index) FROM duckdb_columns() "
        "WHERE database_name = ? AND schema_name = 'main' AND table_name IN "
        "(SELECT table_name FROM duckdb_tables() WHERE database_name = ?) GROUP BY table_name",
        [alias, alias],
    ).fetchall()
    for name, columns in tables:
        rule = classify(str(name), [str(c) for c in columns])
        target = f"{alias}.main.{_quoted(str(name))}"
        origin = f"{source}.main.{_quoted(str(name))} AS x"
        if rule is None or rule.rows is Rows.DROP:
            cursor.execute(f"DROP TABLE {target}")
            continue
        if rule.rows is Rows.ALL:
            cursor.execute(f"INSERT INTO {target} SELECT * FROM {origin}")  # noqa: S608
        elif rule.rows is Rows.TEAM:
            cursor.execute(
                f"INSERT INTO {target} SELECT * FROM {origin} WHERE x.team = ?",  # noqa: S608
                [scope.team],
            )
        else:
            assert rule.kind is not None
            assert rule.column is not None
            condition, params = _rows_of(source, rule, scope.visible)
            cursor.execute(
                f"INSERT INTO {target} SELECT * FROM {origin} WHERE {condition}",  # noqa: S608
                params,
            )
    sequences = cursor.execute(
        "SELECT sequence_name FROM duckdb_sequences() WHERE database_name = ?", [alias]
    ).fetchall()
    for (sequence,) in sequences:
        cursor.execute(f"DROP SEQUENCE {alias}.main.{_quoted(str(sequence))}")


def _rows_of(source: str, rule: TableRule, visible: Visible) -> tuple[str, list[object]]:
    """The condition on ``x`` (a row of the table) of an OBJECT rule."""
    assert rule.kind is not None
    assert rule.column is not None
    column = f"x.{_quoted(rule.column)}"
    if rule.kind in ("run", "session"):
        # Records tables hold millions of rows: the readable runs are found once (a
        # session is a row of runs too), and the rows joined against them.
        condition, params = visible(rule.kind, "v.run_id")
        runs = f"SELECT v.run_id FROM {source}.main.runs AS v WHERE {condition}"  # noqa: S608
        return f"{column} IN ({runs})", params
    return visible(rule.kind, column)


def scrub_copy(cursor: duckdb.DuckDBPyConnection, alias: str) -> None:
    """Replace, in the attached copy ``alias``, every schedule's ``webhook_url`` by its
    public form (the table is rewritten, not updated in place)."""
    found = first_row(
        cursor.execute(
            "SELECT 1 FROM duckdb_columns() WHERE database_name = ? AND schema_name = 'main' "
            "AND table_name = 'schedules' AND column_name = 'webhook_url'",
            [alias],
        )
    )
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
