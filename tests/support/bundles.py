"""Run bundles rewritten as a test needs them: members dropped, edited or added, the
manifest changed, a bundle made as an older schema version wrote it, raw tar members of
any type (links, traversal names) for the hostile-archive tests."""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from analytics.sql.files import load_sql
from analytics.store.bundle_archive import read_archive
from analytics.store.bundle_tables import table_columns
from analytics.store.db import SCHEMA_VERSION, create_at_version

_ADDED = re.compile(r"ALTER TABLE request_records ADD COLUMN IF NOT EXISTS (\w+)")


def read_bundle(path: Path) -> tuple[dict[str, Any], dict[str, pa.Table]]:
    """The manifest (as JSON) and each member's rows, by table."""
    files = read_archive(path)
    manifest = json.loads(files.manifest)
    tables = {
        name.removesuffix(".parquet"): pq.read_table(io.BytesIO(data))
        for name, data in files.tables.items()
    }
    return manifest, tables


def parquet(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def write_bundle(
    path: Path,
    manifest: dict[str, Any],
    tables: dict[str, pa.Table],
    *,
    fix_manifest: bool = True,
) -> Path:
    """Write a bundle of ``tables``; ``fix_manifest`` sets its members (checksums, rows)
    to match them, as an honest writer would."""
    members = {f"{t}.parquet": parquet(rows) for t, rows in tables.items()}
    if fix_manifest:
        manifest = {
            **manifest,
            "members": [
                {
                    "name": name,
                    "table": name.removesuffix(".parquet"),
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "rows": tables[name.removesuffix(".parquet")].num_rows,
                }
                for name, data in members.items()
            ],
        }
    raw_tar(
        path,
        [("manifest.json", json.dumps(manifest).encode(), tarfile.REGTYPE, "")]
        + [(name, data, tarfile.REGTYPE, "") for name, data in members.items()],
    )
    return path


def raw_tar(path: Path, members: list[tuple[str, bytes, bytes, str]]) -> Path:
    """A tar of (name, data, type, link target) members, written as given."""
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data, kind, target in members:
            info = tarfile.TarInfo(name)
            info.type = kind
            info.linkname = target
            info.size = len(data) if kind == tarfile.REGTYPE else 0
            tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
    return path


def rewrite(
    source: Path,
    target: Path,
    edit: Callable[[dict[str, Any], dict[str, pa.Table]], None],
    *,
    fix_manifest: bool = True,
) -> Path:
    """``source`` rewritten to ``target`` after ``edit`` changed its manifest and tables."""
    manifest, tables = read_bundle(source)
    edit(manifest, tables)
    return write_bundle(target, manifest, tables, fix_manifest=fix_manifest)


def as_schema_version(source: Path, target: Path, version: int) -> Path:
    """``source`` as tokenbench at schema ``version`` would have written it: only the
    tables and columns that version had (request_records without the columns later
    migrations added), the manifest saying ``version``."""
    scratch = duckdb.connect(":memory:")
    create_at_version(scratch, version)
    later = {
        column
        for v in range(version + 1, SCHEMA_VERSION + 1)
        for column in _ADDED.findall(load_sql(f"schema_v{v}"))
    }

    def edit(manifest: dict[str, Any], tables: dict[str, pa.Table]) -> None:
        manifest["schema_version"] = version
        for table in list(tables):
            had = {c for c, _ in table_columns(scratch, table)}
            if table == "request_records":
                had -= later
            if not had:
                del tables[table]
                continue
            keep = [c for c in tables[table].column_names if c in had]
            tables[table] = tables[table].select(keep)

    try:
        return rewrite(source, target, edit)
    finally:
        scratch.close()
