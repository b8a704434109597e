"""Encoding a record-batch reader piece by piece: the pieces make one valid Arrow stream
or Parquet file, a message per batch, row groups of the asked size, and a run without
rows still says its columns."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq

from analytics.query.record_export import arrow_stream, parquet_stream

SCHEMA = pa.schema([("seq", pa.int64()), ("shard_id", pa.string())])


def reader(rows: int, batch_rows: int) -> pa.RecordBatchReader:
    table = pa.table({"seq": list(range(rows)), "shard_id": [f"s{i % 3}" for i in range(rows)]})
    batches = table.cast(SCHEMA).to_batches(max_chunksize=batch_rows)
    return pa.RecordBatchReader.from_batches(SCHEMA, batches)


def test_arrow_pieces_are_one_stream_a_message_per_batch() -> None:
    pieces = list(arrow_stream(reader(10, 3)))
    assert len(pieces) == 4 + 1  # a piece per batch, then the end-of-stream marker
    assert all(pieces[:4])  # every batch's piece was handed on before the next was read
    batches = list(pa.ipc.open_stream(b"".join(pieces)))
    assert [b.num_rows for b in batches] == [3, 3, 3, 1]
    assert pa.Table.from_batches(batches).column("seq").to_pylist() == list(range(10))


def test_parquet_pieces_are_one_file_in_row_groups_of_the_asked_size() -> None:
    # Batches of 3 rows regrouped into row groups of 4: a group can span batches.
    pieces = list(parquet_stream(reader(10, 3), row_group_rows=4))
    parquet = pq.ParquetFile(io.BytesIO(b"".join(pieces)))
    groups = [parquet.metadata.row_group(i).num_rows for i in range(parquet.num_row_groups)]
    assert groups == [4, 4, 2]
    assert len(pieces) == 3  # two full groups as they filled, then the rest and the footer
    assert parquet.read().column("seq").to_pylist() == list(range(10))


def test_an_empty_run_still_has_its_columns() -> None:
    arrow = pa.ipc.open_stream(b"".join(arrow_stream(reader(0, 3)))).read_all()
    parquet = pq.read_table(io.BytesIO(b"".join(parquet_stream(reader(0, 3)))))
    assert arrow.num_rows == parquet.num_rows == 0
    assert arrow.schema.names == parquet.schema.names == ["seq", "shard_id"]
