"""The bundle manifest: bounded, versions checked first, every field named on error."""

from __future__ import annotations

import json
from typing import Any

import pytest

from analytics.store.bundle_manifest import (
    BUNDLE_FORMAT,
    MAX_MANIFEST_DEPTH,
    BundleError,
    NotABundleError,
    json_depth,
    parse_manifest,
)

SHA = "0" * 64


def manifest(**fields: Any) -> bytes:
    data: dict[str, Any] = {
        "format": BUNDLE_FORMAT,
        "bundle_version": 1,
        "schema_version": 20,
        "run_id": "run-1",
        "created_at": "2026-01-01T00:00:00+00:00",
        "tokenbench_version": "0.1.0",
        "provenance": {"tool": "tokenbench"},
        "members": [{"name": "runs.parquet", "table": "runs", "sha256": SHA, "rows": 1}],
    }
    data.update(fields)
    return json.dumps(data).encode()


def test_a_valid_manifest_parses() -> None:
    parsed = parse_manifest(manifest(), 20)
    assert parsed.run_id == "run-1"
    assert [m.table for m in parsed.members] == ["runs"]


def test_json_depth_counts_nesting_and_skips_strings() -> None:
    assert json_depth('{"a": [1, {"b": "[[[{{"}]}') == 3
    assert json_depth('"\\"[["') == 0


def test_a_deep_manifest_is_refused_before_parsing() -> None:
    deep = b'{"format": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with pytest.raises(BundleError, match=f"deeper than {MAX_MANIFEST_DEPTH}"):
        parse_manifest(deep, 20)


def test_another_format_is_not_a_bundle() -> None:
    with pytest.raises(
        NotABundleError, match=r"not a tokenbench bundle \(manifest.json has no format"
    ):
        parse_manifest(manifest(format="guidellm"), 20)


def test_an_unknown_bundle_version_is_refused_by_name() -> None:
    with pytest.raises(BundleError, match=r"bundle_version 2 is not one this tokenbench reads"):
        parse_manifest(manifest(bundle_version=2, new_field=1), 20)


def test_a_newer_schema_is_refused_with_what_to_do() -> None:
    with pytest.raises(BundleError, match=r"schema_version 21 is newer.*upgrade tokenbench"):
        parse_manifest(manifest(schema_version=21), 20)


@pytest.mark.parametrize(
    ("fields", "path"),
    [
        (
            {"members": [{"name": "runs.parquet", "table": "runs", "sha256": "x", "rows": 1}]},
            "members.0.sha256",
        ),
        (
            {"members": [{"name": "../x.parquet", "table": "runs", "sha256": SHA, "rows": 1}]},
            "members.0.name",
        ),
        (
            {"members": [{"name": "runs.parquet", "table": "runs", "sha256": SHA, "rows": -1}]},
            "members.0.rows",
        ),
        ({"run_id": ""}, "run_id"),
        ({"extra": 1}, "extra"),
    ],
)
def test_a_bad_field_is_named(fields: dict[str, Any], path: str) -> None:
    with pytest.raises(BundleError, match=f"manifest.json: {path}"):
        parse_manifest(manifest(**fields), 20)


def test_a_member_named_after_another_table_is_refused() -> None:
    member = {"name": "shards.parquet", "table": "runs", "sha256": SHA, "rows": 1}
    with pytest.raises(BundleError, match=r"members.0.name: 'shards.parquet' is not runs"):
        parse_manifest(manifest(members=[member]), 20)


def test_not_json_is_named() -> None:
    with pytest.raises(BundleError, match=r"manifest.json: not JSON"):
        parse_manifest(b"{nope", 20)
