"""Hostile run bundles given to ``tokenbench import``: each is refused with a message that
names the member or field, no file is written outside the database, and nothing is
stored (the destination file is not even created)."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import analytics.store.bundle_archive as archive
from analytics.store.bundles import export_run
from analytics.store.db import connect
from tests.conftest import CliResult
from tests.support.bundles import raw_tar, read_bundle, rewrite, write_bundle
from tests.support.regional_run import store_regional_run

pytestmark = pytest.mark.integration

Cli = Callable[..., CliResult]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hostile")
    store_regional_run(folder / "s.duckdb", "good")
    con = connect(folder / "s.duckdb", read_only=True)
    export_run(con, "good", folder / "good.tbz", dt.datetime.now(dt.UTC))
    con.close()
    return folder / "good.tbz"


def refused(cli: Cli, path: Path, tmp_path: Path, *needles: str) -> None:
    """``path`` imported: exit 2, each needle in the message, no traceback, no database
    file, nothing written beside the bundle but what the test made."""
    before = set(tmp_path.rglob("*"))
    db = tmp_path / "dest.duckdb"
    result = cli("import", str(path), "--db", str(db))
    assert result.code == 2, result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr
    assert not db.exists()
    assert set(tmp_path.rglob("*")) == before
    assert result.stdout == ""


def manifest_bytes(bundle: Path) -> bytes:
    with tarfile.open(bundle) as tar:
        member = tar.extractfile("manifest.json")
        assert member is not None
        return member.read()


@pytest.mark.parametrize(
    "name", ["../evil.parquet", "/tmp/evil.parquet", "runs.parquet/../../x", "./runs.parquet"]
)
def test_traversal_names_are_refused(
    bundle: Path, tmp_path: Path, tokenbench_in_process: Cli, name: str
) -> None:
    hostile = raw_tar(
        tmp_path / "h.tbz",
        [
            ("manifest.json", manifest_bytes(bundle), tarfile.REGTYPE, ""),
            (name, b"x", tarfile.REGTYPE, ""),
        ],
    )
    refused(tokenbench_in_process, hostile, tmp_path, "not a member a bundle may have")
    assert not (tmp_path.parent / "evil.parquet").exists()


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE])
def test_link_members_are_refused(
    bundle: Path, tmp_path: Path, tokenbench_in_process: Cli, kind: bytes
) -> None:
    hostile = raw_tar(
        tmp_path / "h.tbz",
        [
            ("manifest.json", manifest_bytes(bundle), tarfile.REGTYPE, ""),
            ("runs.parquet", b"", kind, "/etc/passwd"),
        ],
    )
    refused(tokenbench_in_process, hostile, tmp_path, "runs.parquet: not a regular file")


def test_a_huge_member_is_refused_before_it_is_read(
    bundle: Path, tmp_path: Path, tokenbench_in_process: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    hostile = raw_tar(
        tmp_path / "h.tbz",
        [
            ("manifest.json", manifest_bytes(bundle), tarfile.REGTYPE, ""),
            ("request_records.parquet", b"\0" * 300_000, tarfile.REGTYPE, ""),
        ],
    )
    monkeypatch.setattr(archive, "MAX_BUNDLE_BYTES", 100_000)
    refused(tokenbench_in_process, hostile, tmp_path, "more than a bundle may hold")


def test_a_member_claiming_more_bytes_than_the_file_is_refused(
    bundle: Path, tmp_path: Path, tokenbench_in_process: Cli
) -> None:
    path = raw_tar(
        tmp_path / "h.tbz",
        [
            ("manifest.json", manifest_bytes(bundle), tarfile.REGTYPE, ""),
            ("runs.parquet", b"x" * 10, tarfile.REGTYPE, ""),
        ],
    )
    data = bytearray(path.read_bytes())
    # The second header's size field (octal, 12 bytes at offset 124): a few GiB.
    header = next(o for o in range(0, len(data), 512) if data[o : o + 13] == b"runs.parquet\0")
    data[header + 124 : header + 136] = b"77777777777\0"
    checksum = sum(data[header : header + 148]) + 8 * 32 + sum(data[header + 156 : header + 512])
    data[header + 148 : header + 156] = f"{checksum:06o}\0 ".encode()
    path.write_bytes(bytes(data))
    refused(tokenbench_in_process, path, tmp_path, "runs.parquet")


def test_a_bad_checksum_is_refused(
    bundle: Path, tmp_path: Path, tokenbench_in_process: Cli
) -> None:
    def flip(manifest: dict[str, Any], _: dict[str, pa.Table]) -> None:
        manifest["members"][0]["sha256"] = "f" * 64

    hostile = rewrite(bundle, tmp_path / "h.tbz", flip, fix_manifest=False)
    refused(tokenbench_in_process, hostile, tmp_path, "SHA-256 differs from manifest.json's")


def test_a_manifest_lying_about_row_counts_is_refused(
    bundle: Path, tmp_path: Path, tokenbench_in_process: Cli
) -> None:
    manifest, tables = read_bundle(bundle)
    tables["request_records"] = tables["request_records"].slice(0, 5)
    path = write_bundle(tmp_path / "h.tbz", manifest, tables)  # honest checksums...
    manifest, _ = read_bundle(path)
    for member in manifest["members"]:
        if member["table"] == "request_records":
            member["rows"] = 5000  # ...and a lie about the rows
    # The same tables encode to the same bytes: the checksums hold, the row count lies.
    lying = write_bundle(tmp_path / "lie.tbz", manifest, tables, fix_manifest=False)
    refused(
        tokenbench_in_process,
        lying,
        tmp_path,
        "request_records.parquet: 5 rows, manifest.json says 5000",
    )


def test_rows_of_another_run_are_refused(
    bundle: Path, tmp_path: Path, tokenbench_in_process: Cli
) -> None:
    def other_run(_: dict[str, Any], tables: dict[str, pa.Table]) -> None:
        records = tables["request_records"]
        ids = pa.array(["victim-run"] * records.num_rows)
        tables["request_records"] = records.set_column(
            records.column_names.index("run_id"), "run_id", ids
        )

    hostile = rewrite(bundle, tmp_path / "h.tbz", other_run)
    refused(
        tokenbench_in_process,
        hostile,
        tmp_path,
        "request_records.parquet: run_id",
        "another run than 'good'",
    )


def test_a_member_not_in_the_manifest_is_refused(
    bundle: Path, tmp_path: Path, tokenbench_in_process: Cli
) -> None:
    def forget(manifest: dict[str, Any], _: dict[str, pa.Table]) -> None:
        manifest["members"] = [m for m in manifest["members"] if m["table"] != "shards"]

    hostile = rewrite(bundle, tmp_path / "h.tbz", forget, fix_manifest=False)
    refused(tokenbench_in_process, hostile, tmp_path, "shards.parquet: in the archive but not")


def test_a_column_the_schema_never_had_is_refused(
    bundle: Path, tmp_path: Path, tokenbench_in_process: Cli
) -> None:
    def extra(_: dict[str, Any], tables: dict[str, pa.Table]) -> None:
        runs = tables["runs"]
        tables["runs"] = runs.append_column("api_key", pa.array(["sk-live"] * runs.num_rows))

    hostile = rewrite(bundle, tmp_path / "h.tbz", extra)
    refused(tokenbench_in_process, hostile, tmp_path, "runs.parquet: column 'api_key'")


def test_a_deep_manifest_is_refused(
    bundle: Path, tmp_path: Path, tokenbench_in_process: Cli
) -> None:
    deep = b'{"format": "tokenbench-run-bundle", "x": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"
    hostile = raw_tar(tmp_path / "h.tbz", [("manifest.json", deep, tarfile.REGTYPE, "")])
    refused(tokenbench_in_process, hostile, tmp_path, "manifest.json: nested deeper")


def test_garbage_parquet_with_a_matching_checksum_is_refused(
    bundle: Path, tmp_path: Path, tokenbench_in_process: Cli
) -> None:
    manifest, tables = read_bundle(bundle)
    path = write_bundle(tmp_path / "h.tbz", manifest, tables)
    with tarfile.open(path) as tar:
        members = [(m.name, (tar.extractfile(m) or io.BytesIO()).read()) for m in tar]
    garbage = b"PAR1 not really parquet PAR1"
    meta = json.loads(members[0][1])
    for member in meta["members"]:
        if member["name"] == "shards.parquet":
            member["sha256"] = hashlib.sha256(garbage).hexdigest()
    rebuilt = [("manifest.json", json.dumps(meta).encode(), tarfile.REGTYPE, "")] + [
        (n, garbage if n == "shards.parquet" else d, tarfile.REGTYPE, "") for n, d in members[1:]
    ]
    hostile = raw_tar(tmp_path / "g.tbz", rebuilt)
    refused(tokenbench_in_process, hostile, tmp_path, "shards.parquet: not a readable Parquet")


def test_a_file_of_no_known_tool_is_refused_by_name(
    tmp_path: Path, tokenbench_in_process: Cli
) -> None:
    path = tmp_path / "results.json"
    path.write_text('{"results": []}')
    refused(
        tokenbench_in_process,
        path,
        tmp_path,
        "not a result file of a tool tokenbench imports",
        "expected one of",
    )
