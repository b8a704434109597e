"""The ``request_records`` table, declared by the Arrow record schema (scenarios/wire/records.py).

Workers build record batches with ``REQUEST_RECORD_SCHEMA`` and ingest appends them with
``INSERT INTO request_records SELECT * FROM <batch>``, so the table must have the
schema's columns in its order, each with the DuckDB type of its Arrow type.
Its DDL is generated here through one mapping instead of being written twice; a test
holds a file upgraded from v1 to the same columns and types.

A field added to the Arrow schema is therefore in every new file's table; files that
already exist need a migration that adds it (``ALTER TABLE request_records ADD COLUMN
IF NOT EXISTS …``, a no-op on new files).
"""

from __future__ import annotations

import pyarrow as pa

from scenarios.wire.records import REQUEST_RECORD_SCHEMA

__all__ = ["create_table_sql", "duckdb_type", "request_records_sql"]

# Arrow type → DuckDB type, as DuckDB reads an Arrow column of that type.
_SCALARS: dict[pa.DataType, str] = {
    pa.string(): "VARCHAR",
    pa.bool_(): "BOOLEAN",
    pa.int16(): "SMALLINT",
    pa.int32(): "INTEGER",
    pa.int64(): "BIGINT",
    pa.float64(): "DOUBLE",
}


def duckdb_type(arrow_type: pa.DataType) -> str:
    """The DuckDB column type of an Arrow type (raises ValueError for one not mapped)."""
    if pa.types.is_timestamp(arrow_type) and arrow_type.tz is not None:
        # Instants (UTC) are kept at microseconds, as the table always had them: they only
        # correlate events across machines; durations are the integer ``*_ns`` columns.
        return "TIMESTAMPTZ"
    if pa.types.is_list(arrow_type):
        return f"{duckdb_type(arrow_type.value_type)}[]"
    try:
        return _SCALARS[arrow_type]
    except KeyError:
        raise ValueError(f"no DuckDB column type for Arrow type {arrow_type}") from None


def create_table_sql(table: str, schema: pa.Schema) -> str:
    """``CREATE TABLE`` of ``table`` with ``schema``'s columns, in order; a field that is
    not nullable is ``NOT NULL``."""
    columns = ",\n".join(
        f"    {field.name} {duckdb_type(field.type)}{'' if field.nullable else ' NOT NULL'}"
        for field in schema
    )
    return f"CREATE TABLE {table} (\n{columns}\n)"


def request_records_sql() -> str:
    """The DDL of ``request_records`` (one row per request of any attempt)."""
    return create_table_sql("request_records", REQUEST_RECORD_SCHEMA)
