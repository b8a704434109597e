"""Checking an uploaded bundle in its own process: the same rows as a local import,
refusals with the reason, and a cap on the rows it hands back."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from analytics.store.bundle_child import check_in_child, is_bundle
from analytics.store.bundle_manifest import BundleError
from analytics.store.bundles import bundle_rows, export_run, load_bundle
from analytics.store.db import connect
from tests.support.regional_run import store_regional_run


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bundle")
    store_regional_run(folder / "s.duckdb", "r1")
    con = connect(folder / "s.duckdb", read_only=True)
    export_run(con, "r1", folder / "r1.tbz", dt.datetime.now(dt.UTC))
    con.close()
    return folder / "r1.tbz"


def test_the_child_answers_the_rows_a_local_import_reads(bundle: Path) -> None:
    data = bundle.read_bytes()
    assert is_bundle(data) and not is_bundle(b'{"benchmarks": []}')
    checked = check_in_child(data, 1 << 30)
    local = bundle_rows(load_bundle(bundle))
    assert checked.run_id == "r1"
    assert set(checked.tables) == set(local)
    for table, rows in local.items():
        assert checked.tables[table].equals(rows), table


def test_a_bundle_is_refused_with_its_reason(bundle: Path) -> None:
    data = bytearray(bundle.read_bytes())
    with pytest.raises(BundleError, match="more than 1000"):
        check_in_child(bytes(data), 1000)  # the rows decode past the cap given
    member = data.index(b"shards.parquet\0")
    data[member + 512 + 64] ^= 0xFF
    with pytest.raises(BundleError, match=r"shards\.parquet"):
        check_in_child(bytes(data), 1 << 30)
    with pytest.raises(BundleError, match=r"not a tar archive|no manifest"):
        check_in_child(b"\0" * 1024, 1 << 30)
