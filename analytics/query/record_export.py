"""A run's request records as an Arrow IPC stream or a Parquet file, encoded as they are
read (``GET /v1/runs/{id}/records``).

The answer used to be built whole: the run's rows as one Arrow table, the encoded answer
in a buffer, then a bytes copy of that buffer, so exporting a run of 1M records held
about three times its Arrow size in the control plane at once. Here the rows come from
DuckDB as a record-batch reader (:func:`record_reader`) and each batch is encoded and
handed on before the next is read: one IPC message per batch, one Parquet row group per
``ROW_GROUP_ROWS`` rows. The control plane then holds a batch (or a row group) of the
answer, plus DuckDB's own working memory for the query's sort, which its buffer manager
bounds and spills.

The reader holds a DuckDB read transaction until the last batch is read: rows committed
meanwhile are not in the answer, and checkpoints wait until it ends (a slow client holds
it for as long as it takes to read).
"""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["BATCH_ROWS", "ROW_GROUP_ROWS", "arrow_stream", "parquet_stream", "record_reader"]

# Rows per Arrow IPC message (about 5 MB of the standard record).
BATCH_ROWS = 16_384
# Rows per Parquet row group: what the writer holds before it writes it out.
ROW_GROUP_ROWS = 65_536

_SQL = "SELECT * FROM requests WHERE run_id = ? ORDER BY stage, shard_id, seq"


def record_reader(
    con: duckdb.DuckDBPyConnection, run_id: str, batch_rows: int = BATCH_ROWS
) -> pa.RecordBatchReader:
    """The run's rows of the ``requests`` view (accepted attempts) in record order, as
    batches of at most ``batch_rows`` rows."""
    return con.sql(_SQL, params=[run_id]).to_arrow_reader(batch_rows)


class _Pieces:
    """A write-only file that keeps what was written until it is taken."""

    closed = False

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._position = 0

    def write(self, data: bytes | memoryview) -> int:
        """Keep ``data`` (a copy: the writer may reuse its buffer)."""
        self._parts.append(bytes(data))
        self._position += len(data)
        return len(data)

    def tell(self) -> int:
        """Bytes written so far (Parquet's writer records offsets)."""
        return self._position

    def flush(self) -> None:
        """Nothing to flush: pieces are taken by the reader of this file."""

    def writable(self) -> bool:
        """A sink, never read."""
        return True

    def take(self) -> bytes:
        """What was written since the last take."""
        out = b"".join(self._parts)
        self._parts.clear()
        return out


def arrow_stream(reader: pa.RecordBatchReader) -> Iterator[bytes]:
    """``reader``'s batches as the pieces of one Arrow IPC stream, a message a batch."""
    sink = _Pieces()
    with pa.ipc.new_stream(sink, reader.schema) as writer:
        for batch in reader:
            writer.write_batch(batch)
            yield sink.take()
    # The schema, for a run without rows, and the end-of-stream marker.
    yield sink.take()


def parquet_stream(
    reader: pa.RecordBatchReader, row_group_rows: int = ROW_GROUP_ROWS
) -> Iterator[bytes]:
    """``reader``'s batches as the pieces of one Parquet file, a row group per
    ``row_group_rows`` rows (the last one smaller), then the footer."""
    sink = _Pieces()
    with pq.ParquetWriter(sink, reader.schema) as writer:
        held: list[pa.RecordBatch] = []
        rows = 0
        for batch in reader:
            held.append(batch)
            rows += batch.num_rows
            while rows >= row_group_rows:
                table = pa.Table.from_batches(held, reader.schema)
                writer.write_table(table.slice(0, row_group_rows), row_group_size=row_group_rows)
                rest = table.slice(row_group_rows)
                held, rows = rest.to_batches(), rest.num_rows
                yield sink.take()
        if rows:
            writer.write_table(pa.Table.from_batches(held, reader.schema))
    yield sink.take()
