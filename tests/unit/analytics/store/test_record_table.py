"""The request_records table comes from the Arrow record schema, in new and upgraded files."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from analytics.store.db import connect
from analytics.store.record_table import create_table_sql, duckdb_type
from scenarios.wire.records import REQUEST_RECORD_SCHEMA

SCHEMA_V1_AS_SHIPPED = (
    next(p for p in Path(__file__).parents if p.name == "tests")
    / "data"
    / "schema_v1_as_shipped.sql"
)
Column = tuple[str, str, bool]  # name, DuckDB type, nullable


def columns(con: duckdb.DuckDBPyConnection, table: str) -> list[Column]:
    rows = con.execute(
        "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
        "WHERE table_name = ? ORDER BY ordinal_position",
        [table],
    ).fetchall()
    return [(name, kind, nullable == "YES") for name, kind, nullable in rows]


def implied_by_arrow() -> list[Column]:
    """The columns the Arrow record schema implies, through the one type mapping."""
    con = duckdb.connect()
    con.execute(create_table_sql("probe", REQUEST_RECORD_SCHEMA))
    return columns(con, "probe")


def test_a_file_upgraded_from_v1_has_exactly_the_arrow_schema_s_columns(tmp_path: Path) -> None:
    path = tmp_path / "v1.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        con.execute(SCHEMA_V1_AS_SHIPPED.read_text())
        con.execute("INSERT INTO schema_version VALUES (1)")
    upgraded = connect(path)
    fresh = connect(tmp_path / "new.duckdb")
    assert columns(upgraded, "request_records") == implied_by_arrow()
    assert columns(fresh, "request_records") == implied_by_arrow()


def test_the_mapping_is_how_duckdb_reads_arrow_but_for_instants_at_microseconds() -> None:
    con = duckdb.connect()
    con.register("batch", REQUEST_RECORD_SCHEMA.empty_table())
    con.execute("CREATE TABLE read AS SELECT * FROM batch")
    read = {name: kind for name, kind, _ in columns(con, "read")}
    for name, kind, _ in implied_by_arrow():
        if read[name] == "TIMESTAMPTZ_NS":
            assert kind == "TIMESTAMP WITH TIME ZONE", name  # instants are kept at µs
        else:
            assert kind == read[name], name


def test_the_mapping_covers_nested_and_refuses_unknown_types() -> None:
    assert duckdb_type(pa.list_(pa.int64())) == "BIGINT[]"
    assert duckdb_type(pa.timestamp("ns", tz="UTC")) == "TIMESTAMPTZ"
    with pytest.raises(ValueError, match="no DuckDB column type"):
        duckdb_type(pa.timestamp("ns"))  # naive instants are never stored
    schema = pa.schema([pa.field("a", pa.int16(), nullable=False), ("b", pa.list_(pa.string()))])
    assert create_table_sql("t", schema) == (
        "CREATE TABLE t (\n    a SMALLINT NOT NULL,\n    b VARCHAR[]\n)"
    )
