"""Appending Arrow record batches to DuckDB, exactly once per (run, shard, attempt, batch).

Batches arrive at least once (a re-delivered stream entry, a re-run consumer); the key
of each batch is checked against ``ingested_batches`` inside the same transaction that
appends its rows, so a batch is either stored with its key or not at all.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import duckdb
import pyarrow as pa

from scenarios.records import REQUEST_RECORD_SCHEMA, ipc_to_table


@dataclass(frozen=True, slots=True)
class BatchMessage:
    """One record batch as it travels on the stream."""

    run_id: str
    shard_id: str
    attempt: int
    batch_seq: int
    ipc: bytes


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What one call stored."""

    batches: int
    rows: int
    duplicates: int
    # (shard_id, attempt) -> batches newly stored, for completion tracking.
    per_attempt: dict[tuple[str, int], int]


_KEY_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("shard_id", pa.string()),
        ("attempt", pa.int32()),
        ("batch_seq", pa.int32()),
        ("position", pa.int32()),
    ]
)


def ingest_batches(con: duckdb.DuckDBPyConnection, messages: list[BatchMessage]) -> IngestResult:
    """Store the new batches among ``messages`` in one transaction; skip known ones."""
    if not messages:
        return IngestResult(0, 0, 0, {})
    keys = pa.Table.from_pylist(
        [
            {
                "run_id": m.run_id,
                "shard_id": m.shard_id,
                "attempt": m.attempt,
                "batch_seq": m.batch_seq,
                "position": i,
            }
            for i, m in enumerate(messages)
        ],
        schema=_KEY_SCHEMA,
    )
    con.execute("BEGIN TRANSACTION")
    try:
        con.register("incoming_keys", keys)
        fresh = con.execute(
            """
            SELECT min(k.position) AS position
            FROM incoming_keys AS k
            ANTI JOIN ingested_batches AS b USING (run_id, shard_id, attempt, batch_seq)
            GROUP BY k.run_id, k.shard_id, k.attempt, k.batch_seq
            ORDER BY position
            """
        ).fetchall()
        con.unregister("incoming_keys")
        chosen = [messages[row[0]] for row in fresh]
        tables = [ipc_to_table(m.ipc) for m in chosen]
        rows = 0
        if tables:
            records = pa.concat_tables(tables).cast(REQUEST_RECORD_SCHEMA)
            rows = records.num_rows
            con.register("incoming_records", records)
            con.execute("INSERT INTO request_records SELECT * FROM incoming_records")
            con.unregister("incoming_records")
            now = dt.datetime.now(dt.UTC)
            con.executemany(
                "INSERT INTO ingested_batches VALUES (?, ?, ?, ?, ?, ?)",
                [
                    [m.run_id, m.shard_id, m.attempt, m.batch_seq, t.num_rows, now]
                    for m, t in zip(chosen, tables, strict=True)
                ],
            )
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    per_attempt: dict[tuple[str, int], int] = {}
    for message in chosen:
        key = (message.shard_id, message.attempt)
        per_attempt[key] = per_attempt.get(key, 0) + 1
    return IngestResult(len(chosen), rows, len(messages) - len(chosen), per_attempt)
