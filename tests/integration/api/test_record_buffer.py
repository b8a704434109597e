"""api/control/record_buffer.py against a real Redis stream and a real DuckDB file: every
batch stored exactly once across parallel part transactions, re-read and reclaimed
entries, a crash before or after a commit; the flush deadline and read sizes by a
clock of the test's own (never by wall time)."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
import redis
from redis.asyncio import Redis

from analytics.store.db import connect
from analytics.store.ingest import IngestResult
from api.control.record_buffer import (
    MIN_READ_ENTRIES,
    READ_ROWS,
    RecordBuffer,
    _Part,
    _Pending,
    store_due,
)
from api.local.redis_server import RedisServer
from scenarios.wire.contract import RecordBatch, records_stream
from scenarios.wire.records import batch_to_ipc, records_to_batch
from tests.support.builders import ROW_CONTEXT, timed_result
from workers.prompts.plan import PlannedRequest
from workers.shard.rows import record_row

pytestmark = pytest.mark.integration

OWN_DB = 10
GROUP = "control"


@pytest.fixture
def url(redis_server: RedisServer) -> Iterator[str]:
    """An empty Redis database of this test's own."""
    own = f"redis://127.0.0.1:{redis_server.port}/{OWN_DB}"
    flush = redis.Redis.from_url(own)
    flush.flushdb()
    yield own
    flush.flushdb()
    flush.close()


class Counts:
    """A coordinator's view of what was stored: batches per (shard, attempt), rows."""

    def __init__(self) -> None:
        self.batches: dict[tuple[str, int], int] = {}
        self.rows = 0
        self.settled = 0

    def on_ingested(self, per_attempt: dict[tuple[str, int], int], rows: int) -> None:
        for key, count in per_attempt.items():
            self.batches[key] = self.batches.get(key, 0) + count
        self.rows += rows

    def settle(self) -> None:
        self.settled += 1


def entry(
    shard: str, batch_seq: int, rows: int, attempt: int = 1, run_id: str = "r"
) -> dict[str, Any]:
    """A records stream entry: ``rows`` records of the batch, keyed as a worker keys it."""
    records = [
        record_row(
            ROW_CONTEXT, PlannedRequest(batch_seq * 1000 + i, 1, 2, "p"), timed_result(i, 50, [5])
        )
        | {"run_id": run_id, "shard_id": shard, "attempt": attempt}
        for i in range(rows)
    ]
    batch = RecordBatch(shard, attempt, batch_seq, rows, batch_to_ipc(records_to_batch(records)))
    return dict(batch.fields())


def as_read(fields: dict[str, Any]) -> dict[bytes, bytes]:
    """The entry as a read from Redis returns it (bytes keys and values)."""
    return {k.encode(): v if isinstance(v, bytes) else str(v).encode() for k, v in fields.items()}


def _run(url: str, body: Callable[[Redis], Awaitable[None]]) -> None:
    async def main() -> None:
        client = Redis.from_url(url)
        try:
            await body(client)
        finally:
            await client.aclose()

    asyncio.run(main())


async def publish(client: Redis, run_id: str, entries: list[dict[str, Any]]) -> str:
    stream = records_stream(run_id)
    await client.xgroup_create(stream, GROUP, id="0", mkstream=True)
    for fields in entries:
        await client.xadd(stream, fields)
    return stream


async def read_into(client: Redis, buffer: RecordBuffer, run_id: str, consumer: str) -> int:
    """Read the run's stream as the control plane does (count sized by the buffer)."""
    stream = records_stream(run_id)
    answer: Any = await client.xreadgroup(
        GROUP, consumer, {stream: ">"}, count=buffer.read_count(), block=10
    )
    read = 0
    for _, entries in answer or []:
        buffer.add(stream, run_id, entries)
        read += len(entries)
    return read


def stored_rows(con: duckdb.DuckDBPyConnection, run_id: str) -> tuple[int, int, int]:
    """Rows stored, distinct (shard, attempt, seq) among them, batch keys recorded."""
    rows, distinct = con.execute(
        "SELECT count(*), count(DISTINCT (shard_id, attempt, seq)) FROM request_records "
        "WHERE run_id = ?",
        [run_id],
    ).fetchall()[0]
    keys = con.execute(
        "SELECT count(*) FROM ingested_batches WHERE run_id = ?", [run_id]
    ).fetchall()[0][0]
    return int(rows), int(distinct), int(keys)


def test_parallel_parts_store_every_batch_once_and_acknowledge_it(url: str, tmp_path: Path) -> None:
    run_id = f"r-{uuid.uuid4().hex[:6]}"
    shards = ("s0.a.local", "s0.b.local", "s1.a.local")
    entries = [entry(shard, seq, 8, run_id=run_id) for shard in shards for seq in range(12)]
    duplicates = [
        entry("s0.a.local", 3, 8, run_id=run_id),
        entry("s1.a.local", 11, 8, run_id=run_id),
    ]  # re-delivered

    async def body(client: Redis) -> None:
        con = connect(tmp_path / "b.duckdb")
        stream = await publish(client, run_id, entries + duplicates)
        buffer = RecordBuffer(con, flush_rows=96, parts=3, part_rows=16)
        counts = Counts()
        parts: list[int] = []
        while await read_into(client, buffer, run_id, "c1"):
            while buffer.due():
                flushed = await buffer.flush()
                parts.append(flushed.parts)
                for result in flushed.results.values():
                    counts.on_ingested(result.per_attempt, result.rows)
                for s, ids in flushed.acks.items():
                    await client.xack(s, GROUP, *ids)
                    await client.xdel(s, *ids)
        await store_due(buffer, client, GROUP, {run_id: counts}, force=True)
        # Every batch once, although parts ran side by side and two entries came twice.
        assert max(parts) == 3
        assert stored_rows(con, run_id) == (len(entries) * 8, len(entries) * 8, len(entries))
        assert counts.batches == dict.fromkeys(((s, 1) for s in shards), 12)
        assert counts.rows == len(entries) * 8
        # Everything acknowledged and deleted: nothing left to redeliver.
        assert await client.xlen(stream) == 0
        assert (await client.xpending(stream, GROUP))["pending"] == 0
        con.close()

    _run(url, body)


def test_a_crash_before_or_after_a_commit_loses_and_doubles_nothing(
    url: str, tmp_path: Path
) -> None:
    run_id = f"r-{uuid.uuid4().hex[:6]}"
    entries = [entry("s0.a.local", seq, 5, run_id=run_id) for seq in range(20)]
    path = tmp_path / "crash.duckdb"

    async def body(client: Redis) -> None:
        stream = await publish(client, run_id, entries)
        # First control plane: reads everything, commits a part of it, never acknowledges
        # (killed after the commit), and holds the rest read but unstored (killed before).
        con = connect(path)
        first = RecordBuffer(con, flush_rows=40, parts=2, part_rows=10)
        while await read_into(client, first, run_id, "first"):
            pass
        flushed = await first.flush()
        assert flushed.rows == 40 and first.rows == 60
        con.close()
        del first
        # The next one reclaims what the first read but never acknowledged.
        con = connect(path)
        second = RecordBuffer(con, flush_rows=40, parts=2, part_rows=10)
        start = "0-0"
        while True:
            start, claimed, *_ = await client.xautoclaim(
                stream, GROUP, "second", min_idle_time=0, start_id=start, count=7
            )
            second.add(stream, run_id, [(i, f) for i, f in claimed if f])
            if start in (b"0-0", "0-0") or not claimed:
                break
        counts = Counts()
        await store_due(second, client, GROUP, {run_id: counts}, force=True)
        assert stored_rows(con, run_id) == (100, 100, 20)
        # What the first had committed counts as duplicates, not as stored again.
        assert counts.batches == {("s0.a.local", 1): 12}
        assert await client.xlen(stream) == 0
        con.close()

    _run(url, body)


def test_a_part_that_fails_keeps_its_entries_and_the_others_are_acknowledged(
    url: str, tmp_path: Path
) -> None:
    good, bad = f"good-{uuid.uuid4().hex[:6]}", f"bad-{uuid.uuid4().hex[:6]}"

    class Failing(RecordBuffer):
        def _store(self, part: list[_Pending]) -> IngestResult:
            if part[0].message.run_id == bad:
                raise duckdb.IOException("disk full")
            return super()._store(part)

    async def body(client: Redis) -> None:
        con = connect(tmp_path / "f.duckdb")
        good_stream = await publish(
            client, good, [entry("s0.a.local", s, 4, run_id=good) for s in range(3)]
        )
        bad_stream = await publish(
            client, bad, [entry("s0.a.local", s, 4, run_id=bad) for s in (0, 1, 1)]
        )  # batch 1 twice: its copy must not be acknowledged while batch 1 is not stored
        buffer = Failing(con, flush_rows=1000)
        await read_into(client, buffer, good, "c")
        await read_into(client, buffer, bad, "c")
        counts = {good: Counts(), bad: Counts()}
        with pytest.raises(duckdb.IOException):
            await store_due(buffer, client, GROUP, counts, force=True)
        assert stored_rows(con, good) == (12, 12, 3) and counts[good].rows == 12
        assert await client.xlen(good_stream) == 0
        # The failed run's entries: still buffered, still pending in Redis, not stored.
        assert (len(buffer), buffer.rows, buffer.runs()) == (3, 12, {bad})
        assert (await client.xpending(bad_stream, GROUP))["pending"] == 3
        assert stored_rows(con, bad) == (0, 0, 0) and counts[bad].rows == 0
        con.close()

    _run(url, body)


class Gated(RecordBuffer):
    """A buffer whose transactions wait until the next flush was taken and joined
    ahead: the reads made while a flush runs are the test's, not the scheduler's."""

    def __init__(self, con: duckdb.DuckDBPyConnection, **kwargs: Any) -> None:
        super().__init__(con, **kwargs)
        self.gate = threading.Event()
        self.gate.set()  # the first flush of a test closes it

    def _store(self, part: _Part) -> IngestResult:
        assert self.gate.wait(timeout=30)
        return super()._store(part)

    def prepare_next(self) -> None:
        super().prepare_next()
        self.gate.set()


def test_the_next_flush_is_read_and_joined_while_one_appends(url: str, tmp_path: Path) -> None:
    run_id = f"r-{uuid.uuid4().hex[:6]}"
    entries = [entry("s0.a.local", seq, 8, run_id=run_id) for seq in range(15)]

    async def body(client: Redis) -> None:
        con = connect(tmp_path / "o.duckdb")
        stream = await publish(client, run_id, entries)
        buffer = Gated(con, flush_rows=40, parts=2, part_rows=16)
        counts = Counts()
        first = 0
        while not buffer.due():  # a full flush's worth (five entries) and more
            first += await read_into(client, buffer, run_id, "c")
        reads: list[int] = []

        async def read_meanwhile() -> None:
            reads.append(await read_into(client, buffer, run_id, "c"))

        buffer.gate.clear()  # the flush's parts wait for the next one to be taken
        stored = await store_due(
            buffer, client, GROUP, {run_id: counts}, read_meanwhile=read_meanwhile
        )
        # One flush per call; the next five entries were read while it ran, and their
        # records joined in a part each, ahead of their own transactions.
        read = first + sum(reads)
        assert stored == 40 and counts.rows == 40 and read >= 10
        assert buffer.prepared and buffer.due() and buffer.rows == 8 * (read - 5)
        taken = buffer._next
        assert taken is not None and len(taken.parts) == 2
        joined = [part.prepared.result() for part in taken.parts if part.prepared is not None]
        assert sum(j.table.num_rows for j in joined if j is not None) == 40
        # Only the stored flush is acknowledged; the read-ahead entries are pending.
        assert (await client.xpending(stream, GROUP))["pending"] == read - 5
        while await read_into(client, buffer, run_id, "c") or len(buffer):
            await store_due(buffer, client, GROUP, {run_id: counts}, force=True)
        assert stored_rows(con, run_id) == (120, 120, 15) and counts.rows == 120
        assert await client.xlen(stream) == 0
        con.close()

    _run(url, body)


def test_a_read_that_fails_during_a_flush_lets_it_finish_and_report(
    url: str, tmp_path: Path
) -> None:
    run_id = f"r-{uuid.uuid4().hex[:6]}"
    entries = [entry("s0.a.local", seq, 8, run_id=run_id) for seq in range(5)]

    async def body(client: Redis) -> None:
        con = connect(tmp_path / "e.duckdb")
        stream = await publish(client, run_id, entries)
        buffer = RecordBuffer(con, flush_rows=40)
        while not buffer.due():
            await read_into(client, buffer, run_id, "c")
        counts = Counts()

        async def failing_read() -> None:
            raise ConnectionError("Redis went away")

        with pytest.raises(ConnectionError):
            await store_due(buffer, client, GROUP, {run_id: counts}, read_meanwhile=failing_read)
        # Committed and reported although the read failed; not acknowledged (a restarted
        # control plane reclaims the entries and finds their batches stored).
        assert counts.rows == 40 and stored_rows(con, run_id) == (40, 40, 5)
        assert len(buffer) == 0 and buffer.runs() == set()
        assert (await client.xpending(stream, GROUP))["pending"] == 5
        con.close()

    _run(url, body)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_oldest_entry_waits_at_most_max_wait_and_reads_never_block_past_it(
    tmp_path: Path,
) -> None:
    clock = Clock()
    buffer = RecordBuffer(
        connect(tmp_path / "c.duckdb"), flush_rows=1000, max_wait_s=0.75, clock=clock
    )
    assert not buffer.due() and buffer.block_ms(200) == 200  # nothing waits
    buffer.add("s", "r", [(b"1-0", as_read(entry("s0.a.local", 0, 3)))])
    clock.now += 0.5
    buffer.add("s", "r", [(b"2-0", as_read(entry("s0.a.local", 1, 3)))])
    assert not buffer.due()
    assert buffer.block_ms(200) == 200
    clock.now += 0.125
    assert not buffer.due() and buffer.block_ms(200) == 125  # 0.125 s left
    clock.now += 0.125
    assert buffer.due() and buffer.block_ms(200) == 1  # read without waiting, then flush
    # Flushing the oldest entry moves the deadline to the next one's.
    asyncio.run(buffer.flush())
    assert len(buffer) == 0


def test_a_full_buffer_is_due_at_once_and_reads_are_sized_in_records(tmp_path: Path) -> None:
    clock = Clock()
    buffer = RecordBuffer(
        connect(tmp_path / "r.duckdb"), flush_rows=2048, max_wait_s=10, clock=clock
    )
    first = buffer.read_count()
    assert first == MIN_READ_ENTRIES  # entry sizes unknown yet
    for seq in range(40):  # small entries: more of them are asked for
        buffer.add("s", "r", [(f"{seq}-0".encode(), as_read(entry("s0.a.local", seq, 2)))])
    assert buffer.read_count() > first
    buffer.add("s", "r", [(b"99-0", as_read(entry("s0.a.local", 99, 2000)))])
    assert buffer.rows >= 2048 and buffer.due()  # two row groups' worth, no waiting
    assert buffer.read_count() == MIN_READ_ENTRIES  # large entries: few are asked for
    # A flush takes whole entries up to flush_rows, the oldest first.
    flushed = asyncio.run(buffer.flush())
    assert flushed.rows == 80 and buffer.rows == 2000 and buffer.runs() == {"r"}


def test_a_read_asks_for_read_rows_records_whatever_the_buffer_misses(tmp_path: Path) -> None:
    buffer = RecordBuffer(connect(tmp_path / "n.duckdb"), flush_rows=10 * READ_ROWS)
    buffer.add("s", "r", [(b"1-0", as_read(entry("s0.a.local", 0, 64)))])
    assert buffer.read_count() == READ_ROWS // 64  # not the 10 reads' worth missing


def test_a_flush_checkpoints_at_most_once_a_period(url: str, tmp_path: Path) -> None:
    """Committed rows are folded into the file a period after the last checkpoint (not
    only at DuckDB's 256 MB WAL threshold), so a trickle of records does not pile up
    uncompressed in the control plane's memory; by the buffer's own clock."""
    run_id = f"r-{uuid.uuid4().hex[:6]}"
    clock = Clock()
    db = tmp_path / "k.duckdb"
    wal = Path(f"{db}.wal")

    def wal_bytes() -> int:
        return wal.stat().st_size if wal.exists() else 0

    async def flush_once(client: Redis, buffer: RecordBuffer, first: int) -> None:
        entries = [entry("s0.a.local", seq, 8, run_id=run_id) for seq in range(first, first + 5)]
        if first == 0:
            await publish(client, run_id, entries)
        else:
            for fields in entries:
                await client.xadd(records_stream(run_id), fields)
        while not buffer.due():
            await read_into(client, buffer, run_id, "c")
        await store_due(buffer, client, GROUP, {run_id: Counts()})

    async def body(client: Redis) -> None:
        con = connect(db)
        buffer = RecordBuffer(con, flush_rows=40, clock=clock, checkpoint_every_s=60.0)
        await flush_once(client, buffer, 0)  # within the period: left in the WAL
        assert buffer.checkpoints == 0 and wal_bytes() > 0
        clock.now += 60.0
        await flush_once(client, buffer, 5)  # a period on: folded into the file
        assert buffer.checkpoints == 1 and wal_bytes() == 0
        assert stored_rows(con, run_id) == (80, 80, 10)
        await flush_once(client, buffer, 10)  # the period starts again
        assert buffer.checkpoints == 1 and wal_bytes() > 0
        con.close()

    _run(url, body)
