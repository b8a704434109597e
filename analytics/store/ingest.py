"""Appending Arrow record batches to DuckDB, exactly once per (run, shard, attempt, batch).

Batches arrive at least once (a re-delivered stream entry, a re-run consumer); the key
of each batch is checked against ``ingested_batches`` inside the same transaction that
appends its rows, so a batch is either stored with its key or not at all.

Speed (benchmarks/analytics_10m.py): a worker's batches are small (256 rows), so the
per-batch costs dominate. Each payload's schema message is compared as bytes with the
first one's instead of being parsed again; the batches are joined into one contiguous
table, because DuckDB scans an Arrow chunk of 256 rows as a 256-row vector (an eighth of
its 2,048) and pays its per-vector costs eight times; the keys go in as one Arrow insert.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import duckdb
import pyarrow as pa

from scenarios.wire.records import REQUEST_RECORD_SCHEMA, ipc_to_table

_KEY_COLUMNS = ("run_id", "shard_id", "attempt", "batch_seq")
# How long freed pages of joined records stay with the process (join_pool): a few
# flushes' time, so a steady ingest reuses them and an idle control plane returns them.
JOIN_POOL_DECAY_MS = 10_000


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


@dataclass(slots=True)
class IngestProfile:
    """CPU seconds per ingest phase (benchmarks/ingest.py --profile).

    Each phase counts the CPU of the thread that ran it (``time.thread_time``), so phases
    on the event loop and in part threads add up while they overlap; DuckDB's own worker
    threads are in none of them (the process's CPU less the phases)."""

    seconds: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Add the CPU time this thread spent in the block to ``name``."""
        started = time.thread_time()
        try:
            yield
        finally:
            spent = time.thread_time() - started
            with self._lock:
                self.seconds[name] = self.seconds.get(name, 0.0) + spent


def _phase(profile: IngestProfile | None, name: str) -> contextlib.AbstractContextManager[None]:
    return profile.phase(name) if profile is not None else contextlib.nullcontext()


_KEY_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("shard_id", pa.string()),
        ("attempt", pa.int32()),
        ("batch_seq", pa.int32()),
        ("position", pa.int32()),
    ]
)


@dataclass(frozen=True, slots=True)
class PreparedRecords:
    """The records of a list of messages decoded and joined into one contiguous table
    ahead of their transaction (:func:`prepare_records`), and each message's rows."""

    table: pa.Table
    rows: list[int]


def prepare_records(
    payloads: list[bytes], profile: IngestProfile | None = None
) -> PreparedRecords | None:
    """The payloads' records as one contiguous table of the stored schema (None for no
    payload): what a transaction appends. DuckDB scans an Arrow chunk of n rows as
    n-row vectors, so the batches are joined into one chunk first (1,024-row chunks cost
    it 2.3× the CPU per row: benchmarks/ingest.py, section 0)."""
    with _phase(profile, "decode"):
        tables = decode_payloads(payloads)
    if not tables:
        return None
    with _phase(profile, "arrow"):
        joined = pa.concat_tables(tables)
        if not joined.schema.equals(REQUEST_RECORD_SCHEMA):
            joined = joined.cast(REQUEST_RECORD_SCHEMA)
        records = joined.combine_chunks(memory_pool=join_pool())
    return PreparedRecords(records, [t.num_rows for t in tables])


@functools.cache
def join_pool() -> pa.MemoryPool:
    """Where joined records live: Arrow's jemalloc pool keeping freed pages for
    ``JOIN_POOL_DECAY_MS``, so the next flush's join reuses them. Arrow's default pool
    hands them back to the kernel within milliseconds, and faulting ~140 MB of fresh
    pages in per flush cost more system CPU than the copy itself (0.2-0.8 µs per
    record on this machine, benchmarks/ingest.py --profile). The default pool where
    Arrow was built without jemalloc."""
    try:
        # Decay applies to arenas made afterwards: set before the pool's first use.
        pa.jemalloc_set_decay_ms(JOIN_POOL_DECAY_MS)
        return pa.jemalloc_memory_pool()
    except NotImplementedError:  # pyarrow.ArrowNotImplementedError derives from it
        return pa.default_memory_pool()


def ingest_batches(
    con: duckdb.DuckDBPyConnection,
    messages: list[BatchMessage],
    profile: IngestProfile | None = None,
    prepared: PreparedRecords | None = None,
) -> IngestResult:
    """Store the new batches among ``messages`` in one transaction; skip known ones
    (``profile`` adds the CPU time of each phase). ``prepared``: the records of all of
    ``messages`` (:func:`prepare_records`, joined while an earlier transaction ran); used
    when none of them is known, else the new ones are decoded here."""
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
        if prepared is None or len(chosen) != len(messages):
            prepared = prepare_records([m.ipc for m in chosen], profile)
        rows = 0
        if prepared is not None:
            rows = prepared.table.num_rows
            with _phase(profile, "append"):
                con.register("incoming_records", prepared.table)
                con.execute("INSERT INTO request_records SELECT * FROM incoming_records")
                con.unregister("incoming_records")
            stored = keys.take([row[0] for row in fresh]).select(list(_KEY_COLUMNS))
            stored = stored.append_column(
                "rows", pa.array(prepared.rows, pa.int32())
            ).append_column(
                "ingested_at",
                pa.array([dt.datetime.now(dt.UTC)] * len(chosen), pa.timestamp("us", "UTC")),
            )
            con.register("incoming_keys", stored)
            con.execute("INSERT INTO ingested_batches SELECT * FROM incoming_keys")
            con.unregister("incoming_keys")
        with _phase(profile, "commit"):
            con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    per_attempt: dict[tuple[str, int], int] = {}
    for message in chosen:
        key = (message.shard_id, message.attempt)
        per_attempt[key] = per_attempt.get(key, 0) + 1
    return IngestResult(len(chosen), rows, len(messages) - len(chosen), per_attempt)


def decode_payloads(payloads: list[bytes]) -> list[pa.Table]:
    """Tables of IPC stream payloads (schema message, one record batch, end of stream).

    Parsing a 41-column schema costs more than reading a 256-row batch, and every payload
    of a run carries the same one: a schema message byte-equal to the first payload's is
    not parsed again. Anything unusual (another schema, several batches) takes the
    general reader."""
    tables: list[pa.Table] = []
    schema: pa.Schema | None = None
    schema_bytes: pa.Buffer | None = None
    for payload in payloads:
        reader = pa.ipc.MessageReader.open_stream(pa.py_buffer(payload))
        try:
            head = reader.read_next_message()
            batch_message = reader.read_next_message()
        except StopIteration:  # no batch at all: let the general reader say what it is
            tables.append(ipc_to_table(payload))
            continue
        if head.type != "schema" or batch_message.type != "record batch" or _has_more(reader):
            tables.append(ipc_to_table(payload))
            continue
        if schema is None or schema_bytes is None or not head.metadata.equals(schema_bytes):
            schema, schema_bytes = pa.ipc.read_schema(head), head.metadata
        batch = pa.ipc.read_record_batch(batch_message, schema)
        tables.append(pa.Table.from_batches([batch], schema))
    return tables


def _has_more(reader: pa.ipc.MessageReader) -> bool:
    try:
        reader.read_next_message()
    except StopIteration:
        return False
    return True
