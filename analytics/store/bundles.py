"""Portable run bundles: one run's rows out of a DuckDB file, and into another, exactly
once and across schema versions (docs/results-schema.md, "Run bundles").

Export reads every bundled table (analytics/store/bundle_tables.py) filtered to the run,
writes each as Parquet (pyarrow, zstd) and a manifest with each member's SHA-256 and row
count. A run whose stored scenario holds a credential in a URL is refused: a bundle
never carries a secret (keys are stored as environment variable names only).

Import checks the manifest and every member's checksum and row count, then loads the
members into a scratch in-memory database created at the bundle's schema version, as a
file written by that version had its tables (columns are matched by name: a column the
bundle lacks is NULL, a column the version never had is refused), checks that every row
is the manifest's run, and migrates the scratch database to the current schema as
``analytics.store.db`` migrates a file (back-fills included). Only then are its rows
inserted into the destination, in one transaction, each only when no row with its key
is stored: importing the same bundle twice adds nothing the second time.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from analytics.sql.results import first_row
from analytics.store.bundle_archive import BundleFiles, read_archive, write_archive
from analytics.store.bundle_manifest import (
    BUNDLE_FORMAT,
    BUNDLE_VERSION,
    BundleError,
    Manifest,
    Member,
    parse_manifest,
)
from analytics.store.bundle_tables import BUNDLE_TABLES, table_columns
from analytics.store.db import SCHEMA_VERSION, create_at_version, migrate, schema_version

__all__ = [
    "ImportResult",
    "LoadedBundle",
    "TableCounts",
    "UnknownRunError",
    "bundle_rows",
    "export_run",
    "import_bundle",
    "insert_bundle",
    "load_bundle",
    "tokenbench_version",
]

_SECRET_NAMES = ("key", "token", "secret", "password", "passwd", "sig", "auth", "credential")


class UnknownRunError(LookupError):
    """The run to export is not in the database."""


def tokenbench_version() -> str:
    """The installed tokenbench's version ("unknown" when not installed as a package)."""
    try:
        return version("tokenbench")
    except PackageNotFoundError:
        return "unknown"


def _credential_paths(value: Any, path: str = "scenario") -> list[str]:
    """Paths of the URL strings in ``value`` that carry a credential: a user:password
    part, or a query parameter named like a key or token."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _credential_paths(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _credential_paths(v, f"{path}.{i}")]
    if not isinstance(value, str) or "://" not in value:
        return []
    try:
        parts = urlsplit(value)
    except ValueError:
        return []
    query_names = [name.lower() for name, _ in parse_qsl(parts.query, keep_blank_values=True)]
    if "@" in parts.netloc or any(s in n for n in query_names for s in _SECRET_NAMES):
        return [path]
    return []


def _parquet(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


def export_run(
    con: duckdb.DuckDBPyConnection, run_id: str, path: Path, now: dt.datetime
) -> Manifest:
    """Write run ``run_id`` of ``con`` (at the current schema) as a bundle at ``path``."""
    row = first_row(
        con.execute("SELECT name, state, scenario FROM runs WHERE run_id = ?", [run_id])
    )
    if row is None:
        raise UnknownRunError(run_id)
    leaks = _credential_paths(json.loads(str(row[2])))
    if leaks:
        raise BundleError(
            f"run {run_id}: {', '.join(leaks)} holds a credential in a URL; a bundle never "
            "carries secrets (keep keys in environment variables, named by *_env fields)"
        )
    members: list[Member] = []
    tables: dict[str, bytes] = {}
    for table, key in BUNDLE_TABLES.items():
        order = ", ".join(key)
        query = f"SELECT * FROM {table} WHERE run_id = ? ORDER BY {order}"  # noqa: S608
        rows = con.sql(query, params=[run_id]).to_arrow_table()
        data = _parquet(rows)
        name = f"{table}.parquet"
        tables[name] = data
        members.append(
            Member(
                name=name, table=table, sha256=hashlib.sha256(data).hexdigest(), rows=rows.num_rows
            )
        )
    manifest = Manifest(
        format=BUNDLE_FORMAT,
        bundle_version=BUNDLE_VERSION,
        schema_version=schema_version(con),
        run_id=run_id,
        created_at=now.astimezone(dt.UTC).isoformat(),
        tokenbench_version=tokenbench_version(),
        provenance={
            "tool": "tokenbench",
            "tool_version": tokenbench_version(),
            "run_name": str(row[0]),
            "run_state": str(row[1]),
        },
        members=members,
    )
    text = json.dumps(manifest.model_dump(mode="json"), indent=2, sort_keys=True)
    write_archive(path, text.encode(), tables)
    return manifest


@dataclass(frozen=True, slots=True)
class LoadedBundle:
    """A checked bundle: its manifest, and a scratch database holding its rows at the
    current schema."""

    manifest: Manifest
    scratch: duckdb.DuckDBPyConnection


def _member_table(name: str, data: bytes) -> pa.Table:
    try:
        return pq.read_table(io.BytesIO(data))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise BundleError(f"member {name}: not a readable Parquet file ({exc})") from None


def _check_members(manifest: Manifest, files: BundleFiles) -> dict[str, pa.Table]:
    listed = {m.name: m for m in manifest.members}
    for name in files.tables:
        if name not in listed:
            raise BundleError(f"member {name}: in the archive but not in manifest.json")
    if "runs.parquet" not in listed:
        raise BundleError("manifest.json: members: no runs.parquet")
    loaded: dict[str, pa.Table] = {}
    for index, member in enumerate(manifest.members):
        if member.table not in BUNDLE_TABLES:
            raise BundleError(
                f"manifest.json: members.{index}.table: unknown table {member.table!r}"
            )
        data = files.tables.get(member.name)
        if data is None:
            raise BundleError(f"member {member.name}: listed in manifest.json but missing")
        if hashlib.sha256(data).hexdigest() != member.sha256:
            raise BundleError(f"member {member.name}: SHA-256 differs from manifest.json's")
        table = _member_table(member.name, data)
        if table.num_rows != member.rows:
            raise BundleError(
                f"member {member.name}: {table.num_rows} rows, manifest.json says {member.rows}"
            )
        loaded[member.table] = table
    return loaded


def _load_member(
    scratch: duckdb.DuckDBPyConnection, table: str, rows: pa.Table, manifest: Manifest
) -> None:
    name = f"{table}.parquet"
    known = {column for column, _ in table_columns(scratch, table)}
    if not known:
        raise BundleError(f"member {name}: no table {table} at schema v{manifest.schema_version}")
    for column in rows.column_names:
        if column not in known:
            raise BundleError(
                f"member {name}: column {column!r} is not in {table} at schema "
                f"v{manifest.schema_version}"
            )
    if "run_id" not in rows.column_names:
        raise BundleError(f"member {name}: no run_id column")
    scratch.register("bundle_member", rows)
    try:
        scratch.execute(f"INSERT INTO {table} BY NAME SELECT * FROM bundle_member")  # noqa: S608
    except duckdb.Error as exc:
        first = str(exc).splitlines()[0]
        raise BundleError(f"member {name}: rows do not fit table {table} ({first})") from None
    finally:
        scratch.unregister("bundle_member")
    other = first_row(
        scratch.execute(
            f"SELECT count(*) FROM {table} WHERE run_id IS DISTINCT FROM ?",  # noqa: S608
            [manifest.run_id],
        )
    )
    if other is not None and int(other[0]) > 0:
        raise BundleError(
            f"member {name}: run_id: {other[0]} rows of another run than {manifest.run_id!r}"
        )
    key = ", ".join(BUNDLE_TABLES[table])
    if table == "request_records":  # the only keyed table without a primary key
        dup = first_row(
            scratch.execute(
                f"SELECT count(*) FROM (SELECT {key} FROM {table} "  # noqa: S608
                "GROUP BY ALL HAVING count(*) > 1)"
            )
        )
        if dup is not None and int(dup[0]) > 0:
            raise BundleError(f"member {name}: rows repeat a key ({key})")


def load_bundle(path: Path) -> LoadedBundle:
    """The checked bundle at ``path``, its rows migrated to the current schema in a
    scratch in-memory database (the caller closes it). Raises :class:`BundleError`."""
    files = read_archive(path)
    manifest = parse_manifest(files.manifest, SCHEMA_VERSION)
    tables = _check_members(manifest, files)
    scratch = duckdb.connect(":memory:")
    try:
        create_at_version(scratch, manifest.schema_version)
        for table in BUNDLE_TABLES:
            if table in tables:
                _load_member(scratch, table, tables[table], manifest)
        if first_row(scratch.execute("SELECT count(*) FROM runs")) != (1,):
            raise BundleError("member runs.parquet: holds no row of the run")
        migrate(scratch)
    except BaseException:
        scratch.close()
        raise
    return LoadedBundle(manifest, scratch)


@dataclass(frozen=True, slots=True)
class TableCounts:
    """Rows of one table: added, and already stored (skipped)."""

    added: int
    skipped: int


@dataclass(frozen=True, slots=True)
class ImportResult:
    """What an import did."""

    run_id: str
    schema_version: int  # the bundle's
    tables: dict[str, TableCounts] = field(default_factory=dict)

    @property
    def added(self) -> int:
        return sum(c.added for c in self.tables.values())

    @property
    def skipped(self) -> int:
        return sum(c.skipped for c in self.tables.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "bundle_schema_version": self.schema_version,
            "rows_added": self.added,
            "rows_skipped": self.skipped,
            "tables": {t: {"added": c.added, "skipped": c.skipped} for t, c in self.tables.items()},
        }


def bundle_rows(loaded: LoadedBundle) -> dict[str, pa.Table]:
    """Every bundled table's rows of the checked bundle (at the current schema), in the
    order an import inserts them; tables without rows left out. The scratch database
    is closed."""
    try:
        tables = {
            table: loaded.scratch.sql(f"SELECT * FROM {table}").to_arrow_table()  # noqa: S608
            for table in BUNDLE_TABLES
        }
    finally:
        loaded.scratch.close()
    return {table: rows for table, rows in tables.items() if rows.num_rows}


def insert_bundle(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    schema_version: int,
    tables: dict[str, pa.Table],
    also: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
) -> ImportResult:
    """Insert a checked bundle's rows (:func:`bundle_rows`) into ``con`` (at the current
    schema): each row whose key is not stored yet, with what ``also`` writes (its
    owner), in one transaction."""
    counts: dict[str, TableCounts] = {}
    con.execute("BEGIN TRANSACTION")
    try:
        for table, key in BUNDLE_TABLES.items():
            rows = tables.get(table)
            if rows is None or rows.num_rows == 0:
                continue
            match = " AND ".join(f"d.{k} IS NOT DISTINCT FROM b.{k}" for k in key)
            con.register("bundle_rows", rows)
            try:
                added = first_row(
                    con.execute(
                        f"INSERT INTO {table} BY NAME SELECT * FROM bundle_rows b "  # noqa: S608
                        f"WHERE NOT EXISTS (SELECT 1 FROM {table} d WHERE {match})"
                    )
                )
            finally:
                con.unregister("bundle_rows")
            n = int(added[0]) if added is not None else 0
            counts[table] = TableCounts(n, rows.num_rows - n)
        if also is not None:
            also(con)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return ImportResult(run_id, schema_version, counts)


def import_bundle(con: duckdb.DuckDBPyConnection, loaded: LoadedBundle) -> ImportResult:
    """Import the checked bundle ``loaded`` (:func:`load_bundle`) into ``con`` (at the
    current schema): all its rows whose keys are not stored yet, in one transaction; the
    scratch database is closed."""
    manifest = loaded.manifest
    return insert_bundle(con, manifest.run_id, manifest.schema_version, bundle_rows(loaded))
