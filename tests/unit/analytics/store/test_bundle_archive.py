"""The bundle file: a tar read into memory by expected names only."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from analytics.store.bundle_archive import (
    MAX_MEMBERS,
    member_names,
    read_archive,
    write_archive,
)
from analytics.store.bundle_manifest import BundleError, NotABundleError
from tests.support.bundles import raw_tar


def test_written_members_read_back(tmp_path: Path) -> None:
    path = tmp_path / "b.tbz"
    write_archive(path, b"{}", {"runs.parquet": b"abc", "shards.parquet": b""})
    files = read_archive(path)
    assert files.manifest == b"{}"
    assert files.tables == {"runs.parquet": b"abc", "shards.parquet": b""}
    assert not (tmp_path / "b.tbz.partial").exists()


def test_member_names_are_the_manifest_and_the_tables() -> None:
    names = member_names()
    assert "manifest.json" in names
    assert "request_records.parquet" in names
    assert len(names) == MAX_MEMBERS


def test_a_file_that_is_not_a_tar_is_not_a_bundle(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"benchmarks": []}')
    with pytest.raises(NotABundleError, match=r"not a tar archive"):
        read_archive(path)


def test_a_tar_without_a_manifest_first_is_not_a_bundle(tmp_path: Path) -> None:
    path = raw_tar(tmp_path / "x.tar", [("runs.parquet", b"x", tarfile.REGTYPE, "")])
    with pytest.raises(NotABundleError, match=r"first member is 'runs.parquet'"):
        read_archive(path)


def test_a_bundle_larger_than_allowed_is_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "b.tbz"
    write_archive(path, b"{}", {"runs.parquet": b"x" * 10_000})
    with pytest.raises(BundleError, match=r"more than a bundle may hold"):
        read_archive(path, max_bytes=5_000)
