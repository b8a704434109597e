"""Run bundles on real DuckDB files: export, import exactly once, older schemas, the
same report in both files, and tampered bundles refused with nothing stored."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from analytics.report.build import build_report
from analytics.store.bundle_manifest import BundleError
from analytics.store.bundle_tables import BUNDLE_TABLES
from analytics.store.bundles import (
    UnknownRunError,
    export_run,
    import_bundle,
    load_bundle,
    tokenbench_version,
)
from analytics.store.db import SCHEMA_VERSION, connect
from tests.support.bundles import as_schema_version, read_bundle, rewrite
from tests.support.figures import same_figures
from tests.support.regional_run import store_regional_run
from tests.support.scrapes import store_scraped_run

NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def counts(path: Path, run_id: str) -> dict[str, int]:
    con = connect(path, read_only=True)
    try:
        return {
            t: int(
                con.execute(f"SELECT count(*) FROM {t} WHERE run_id = ?", [run_id]).fetchall()[0][0]
            )
            for t in BUNDLE_TABLES
        }
    finally:
        con.close()


def report(path: Path, run_id: str) -> dict[str, Any]:
    con = connect(path, read_only=True)
    try:
        return build_report(con, run_id).to_dict()
    finally:
        con.close()


def do_import(db: Path, bundle: Path) -> dict[str, Any]:
    con = connect(db)
    try:
        return import_bundle(con, load_bundle(bundle)).to_json()
    finally:
        con.close()


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A file with two runs (a regional sweep, a run with server telemetry), and the
    sweep's bundle."""
    folder = tmp_path_factory.mktemp("bundles")
    db = folder / "source.duckdb"
    store_regional_run(db, "sweep")
    con = connect(db)
    store_scraped_run(con, "scraped")
    export_run(con, "sweep", folder / "sweep.tbz", NOW)
    con.close()
    return db, folder / "sweep.tbz"


def test_the_manifest_lists_every_table_with_its_rows(source: tuple[Path, Path]) -> None:
    db, bundle = source
    manifest, tables = read_bundle(bundle)
    assert manifest["run_id"] == "sweep"
    assert manifest["schema_version"] == SCHEMA_VERSION
    assert manifest["created_at"] == NOW.isoformat()
    assert manifest["provenance"]["tool_version"] == tokenbench_version()
    assert {m["table"]: m["rows"] for m in manifest["members"]} == counts(db, "sweep")
    assert {t: r.num_rows for t, r in tables.items()} == counts(db, "sweep")


def test_import_into_a_fresh_file_gives_the_same_rows_and_report(
    source: tuple[Path, Path], tmp_path: Path
) -> None:
    db, bundle = source
    target = tmp_path / "target.duckdb"
    answer = do_import(target, bundle)
    assert answer["rows_skipped"] == 0
    assert answer["rows_added"] == sum(counts(db, "sweep").values())
    assert counts(target, "sweep") == counts(db, "sweep")
    assert same_figures(report(target, "sweep"), report(db, "sweep"))


def test_a_second_import_adds_nothing(source: tuple[Path, Path], tmp_path: Path) -> None:
    _, bundle = source
    target = tmp_path / "target.duckdb"
    first = do_import(target, bundle)
    second = do_import(target, bundle)
    assert second["rows_added"] == 0
    assert second["rows_skipped"] == first["rows_added"]


def test_importing_into_the_source_file_adds_nothing(
    source: tuple[Path, Path], tmp_path: Path
) -> None:
    db, bundle = source
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(db.read_bytes())
    assert do_import(copy, bundle)["rows_added"] == 0


def test_group_keyed_rows_are_added_together(source: tuple[Path, Path], tmp_path: Path) -> None:
    db, _ = source
    con = connect(db, read_only=True)
    bundle = tmp_path / "scraped.tbz"
    export_run(con, "scraped", bundle, NOW)
    con.close()
    target = tmp_path / "t.duckdb"
    do_import(target, bundle)
    assert counts(target, "scraped") == counts(db, "scraped")
    assert counts(target, "scraped")["server_metrics"] > 1


@pytest.mark.parametrize("version", [2, 10])
def test_an_older_schema_bundle_is_migrated(
    source: tuple[Path, Path], tmp_path: Path, version: int
) -> None:
    db, bundle = source
    old = as_schema_version(bundle, tmp_path / f"v{version}.tbz", version)
    manifest, tables = read_bundle(old)
    assert manifest["schema_version"] == version
    assert "dns_ns" not in tables["request_records"].column_names
    if version < 3:
        assert "shard_summaries" not in tables
    target = tmp_path / "t.duckdb"
    do_import(target, old)
    moved = counts(target, "sweep")
    assert moved["request_records"] == counts(db, "sweep")["request_records"]
    # v3's back-fill rebuilt the per-shard pre-aggregates from the records.
    assert moved["shard_summaries"] == counts(db, "sweep")["shard_summaries"]
    mine, theirs = report(target, "sweep"), report(db, "sweep")
    assert [s["requests"] for s in mine["stages"]] == [s["requests"] for s in theirs["stages"]]
    assert [s["ttft_p50_ms"] for s in mine["stages"]] == [
        s["ttft_p50_ms"] for s in theirs["stages"]
    ]


def test_an_unknown_run_is_not_exported(source: tuple[Path, Path], tmp_path: Path) -> None:
    db, _ = source
    con = connect(db, read_only=True)
    with pytest.raises(UnknownRunError):
        export_run(con, "nope", tmp_path / "x.tbz", NOW)
    con.close()
    assert not (tmp_path / "x.tbz").exists()


def test_a_credential_in_a_stored_url_is_never_exported(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    store_regional_run(db, "leaky")
    con = connect(db)
    con.execute(
        "UPDATE runs SET scenario = json_merge_patch(scenario, ?) WHERE run_id = 'leaky'",
        ['{"note": "https://user:hunter2@example.test/v1"}'],
    )
    with pytest.raises(BundleError, match=r"scenario.note holds a credential"):
        export_run(con, "leaky", tmp_path / "x.tbz", NOW)
    con.close()
    assert not (tmp_path / "x.tbz").exists()


def test_a_missing_not_null_column_is_refused_naming_the_member(
    source: tuple[Path, Path], tmp_path: Path
) -> None:
    _, bundle = source

    def drop_state(_: dict[str, Any], tables: dict[str, pa.Table]) -> None:
        tables["shards"] = tables["shards"].drop_columns(["state"])

    bad = rewrite(bundle, tmp_path / "bad.tbz", drop_state)
    with pytest.raises(BundleError, match=r"member shards.parquet: rows do not fit"):
        load_bundle(bad)


def test_repeated_request_keys_are_refused(source: tuple[Path, Path], tmp_path: Path) -> None:
    _, bundle = source

    def repeat(_: dict[str, Any], tables: dict[str, pa.Table]) -> None:
        records = tables["request_records"]
        tables["request_records"] = pa.concat_tables([records, records.slice(0, 1)])

    bad = rewrite(bundle, tmp_path / "bad.tbz", repeat)
    with pytest.raises(BundleError, match=r"request_records.parquet: rows repeat a key"):
        load_bundle(bad)
