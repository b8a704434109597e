"""Every table with a run_id is bundled or left out on purpose; keys name real columns."""

from __future__ import annotations

from pathlib import Path

from analytics.shadow.capture import ensure_shadow_schema
from analytics.store.bundle_manifest import Manifest, Member
from analytics.store.bundle_tables import (
    BUNDLE_TABLES,
    EXCLUDED,
    GROUP_KEYED,
    markdown_tables,
    table_columns,
)
from analytics.store.db import connect


def test_every_run_keyed_table_is_bundled_or_excluded(tmp_path: Path) -> None:
    con = connect(tmp_path / "t.duckdb")
    ensure_shadow_schema(con)
    tables = [
        str(row[0])
        for row in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'"
        ).fetchall()
    ]
    run_keyed = {t for t in tables if "run_id" in {c for c, _ in table_columns(con, t)}}
    assert run_keyed == set(BUNDLE_TABLES) | set(EXCLUDED)
    assert not set(BUNDLE_TABLES) & set(EXCLUDED)
    for table, key in BUNDLE_TABLES.items():
        columns = {c for c, _ in table_columns(con, table)}
        assert set(key) <= columns, table
        assert not columns & {"team", "token_id"}, table
    assert set(BUNDLE_TABLES) >= GROUP_KEYED
    con.close()


def test_the_documented_tables_are_the_generated_ones(tmp_path: Path) -> None:
    page = (Path(__file__).parents[4] / "docs" / "results-schema.md").read_text()
    documented = page.split("<!-- bundle-tables:begin -->\n")[1].split("<!-- bundle-tables:end")[0]
    con = connect(tmp_path / "t.duckdb")
    generated = markdown_tables(con)
    con.close()
    assert documented == generated, "regenerate: python -m analytics.store.bundle_tables"


def test_every_manifest_field_is_documented() -> None:
    page = (Path(__file__).parents[4] / "docs" / "results-schema.md").read_text()
    for name in [*Manifest.model_fields, *Member.model_fields]:
        assert f"`{name}`" in page, name
