"""Record batches gathered into few, large, parallel DuckDB transactions.

The control plane used to store each stream read (up to 500 entries, whatever their
size) in one transaction on the event loop's thread. What ingest costs is per row
(DuckDB compresses and writes ~2 µs of CPU per record of 41 columns) plus per commit
(a WAL flush, row groups started and left partially filled), so this buffer:

- sizes reads in records, not entries: it asks Redis for as many entries as fill the
  buffer (from the rows the entries seen so far carried), but at most ``READ_ROWS``
  (8,192) records, so a read of 4,096-row batches does not pull 2M records into memory,
  nor a read of 64-row batches only 32k, and the Redis server copies small replies;
- gathers entries until they hold two DuckDB row groups (2 × 122,880 rows, exactly 240
  of the publisher's 1,024-row batches) or the oldest has waited ``max_wait_s`` (0.75 s),
  then commits them: each part is a whole number of row groups, which DuckDB writes
  straight to the file, so no partially filled row group is left behind for a checkpoint
  to merge;
- splits a flush into up to ``parts`` transactions (one per core) on cursors of their
  own, run in threads (DuckDB releases the GIL), so decoding, appending and committing one
  part overlaps another's, and the event loop keeps serving while they run;
- keeps reading while a flush runs (``store_due``'s ``read_meanwhile``) until the next
  flush's worth is held, then takes it and joins each of its parts into one Arrow chunk
  in a thread (:meth:`RecordBuffer.prepare_next`), so that flush's transactions only
  append. Memory: at most two flushes' entries (the one storing, the one taken ahead)
  and their joined records, plus one read.

Entries are acknowledged (and deleted) only after the transaction that stored them
committed, exactly as before: a crash loses nothing (the next control plane reclaims
the unacknowledged entries) and doubles nothing (``ingested_batches`` is checked in the
same transaction). A batch key appears in at most one part of a flush (duplicates within
the buffer are dropped before splitting), so concurrent parts never race on a key; flushes
run one at a time, so a flush's check sees every key the one before committed.
Freshness: a record is queryable at most ``max_wait_s`` after it was read, plus one flush.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

import duckdb
from redis.asyncio import Redis

from analytics.store.ingest import (
    BatchMessage,
    IngestProfile,
    IngestResult,
    PreparedRecords,
    ingest_batches,
    prepare_records,
)
from scenarios.wire.contract import RecordBatch

log = logging.getLogger(__name__)

__all__ = [
    "CHECKPOINT_EVERY_S",
    "FLUSH_ROWS",
    "MAX_WAIT_S",
    "READ_ROWS",
    "ROW_GROUP_ROWS",
    "Flushed",
    "RecordBuffer",
    "store_due",
]

ROW_GROUP_ROWS = 122_880  # DuckDB's row group size
FLUSH_ROWS = 2 * ROW_GROUP_ROWS
MAX_WAIT_S = 0.75
# Rows committed but not yet checkpointed stay in DuckDB's memory, uncompressed, until
# the WAL reaches the writer's threshold (256 MB, analytics/store/db.py): at 500 records
# a second that is a quarter of an hour of them, and the control plane's RSS sawed by
# ~250 MB with that period (benchmarks/memory.py, soak60). A checkpoint after a flush,
# at least this often, holds them to a minute's worth; a fast ingest reaches the
# threshold first, so it pays one extra checkpoint a minute (docs/analytics.md).
CHECKPOINT_EVERY_S = 60.0
# Entries asked for per stream and read: at least a few (the same count applies to the
# events stream, read in the same call), at most what bounds one reply's memory. Until
# an entry was seen its size is unknown: the first read asks for the minimum.
MIN_READ_ENTRIES = 8
MAX_READ_ENTRIES = 1_000
# Records asked for per read (8 of the publisher's 1,024-row batches, ≈ 4.5 MB of the
# standard record), not a whole flush: a reply of two row groups (≈ 140 MB) cost the
# Redis server 3-4× the CPU per record (its reply buffers and the pages behind them are
# new each time; benchmarks/ingest.py, section 2). Small reads are cheap to repeat while
# a flush runs.
READ_ROWS = 8_192
# How long a read made while a flush runs may block: the flush's end is noticed this late.
FLUSH_POLL_MS = 10

EntryId = bytes | str
Entry = tuple[EntryId, Mapping[bytes, bytes]]


class Ingesting(Protocol):
    """What the buffer reports stored batches to (a run's coordinator)."""

    def on_ingested(self, per_attempt: dict[tuple[str, int], int], rows: int) -> None: ...

    def settle(self) -> None: ...


@dataclass(frozen=True, slots=True)
class _Pending:
    stream: str
    entry_id: EntryId
    message: BatchMessage
    rows: int
    read_at: float

    @property
    def key(self) -> tuple[str, str, int, int]:
        m = self.message
        return (m.run_id, m.shard_id, m.attempt, m.batch_seq)


@dataclass(slots=True)
class Flushed:
    """What one flush committed: results per run, entry ids to acknowledge per stream,
    and the first error of a part that did not commit (its entries stay buffered)."""

    results: dict[str, IngestResult] = field(default_factory=dict)
    acks: dict[str, list[EntryId]] = field(default_factory=dict)
    error: BaseException | None = None
    parts: int = 0  # transactions run

    @property
    def rows(self) -> int:
        """Records newly stored."""
        return sum(r.rows for r in self.results.values())


class RecordBuffer:
    """Record-stream entries read but not yet stored, and the flush that stores them."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        *,
        flush_rows: int = FLUSH_ROWS,
        max_wait_s: float = MAX_WAIT_S,
        parts: int | None = None,
        part_rows: int = ROW_GROUP_ROWS,
        clock: Callable[[], float] = time.monotonic,
        profile: IngestProfile | None = None,
        checkpoint_every_s: float | None = CHECKPOINT_EVERY_S,
    ) -> None:
        self._con = con
        self.flush_rows = flush_rows
        self.max_wait_s = max_wait_s
        self.parts = max(1, parts if parts is not None else os.cpu_count() or 1)
        self.part_rows = part_rows  # a run is cut into parts of at least this many rows
        self._clock = clock
        self._profile = profile  # CPU per phase and thread (benchmarks/ingest.py)
        self._pending: list[_Pending] = []
        self._storing: list[_Pending] = []  # taken by the flush that runs
        self._next: _Flush | None = None  # taken ahead, its parts being joined
        # Joins records for the next flush (one part each) beside the running transactions.
        self._joiner = ThreadPoolExecutor(self.parts, thread_name_prefix="record-join")
        self._rows = 0
        self._rows_per_entry: float | None = None  # of the last read's entries
        self.checkpoint_every_s = checkpoint_every_s  # None: at DuckDB's WAL threshold only
        self._checkpointed_at = clock()
        self.checkpoints = 0  # made by this buffer

    def __len__(self) -> int:
        return len(self._pending) + (len(self._next.entries) if self._next else 0)

    @property
    def rows(self) -> int:
        """Records buffered (taken ahead for the next flush included)."""
        return self._rows + (sum(p.rows for p in self._next.entries) if self._next else 0)

    def add(self, stream: str, run_id: str, entries: Sequence[Entry]) -> None:
        """Buffer a records stream's entries (acknowledged once stored)."""
        now = self._clock()
        rows = 0
        for entry_id, fields in entries:
            batch = RecordBatch.decode(fields)
            key = (run_id, batch.shard_id, batch.attempt, batch.batch_seq)
            message = BatchMessage(*key, batch.ipc)
            self._pending.append(_Pending(stream, entry_id, message, batch.rows, now))
            rows += batch.rows
        self._rows += rows
        if entries:
            self._rows_per_entry = max(rows / len(entries), 1.0)

    def read_count(self) -> int:
        """Entries to ask each stream for: as many as fill the buffer, but no more than
        ``READ_ROWS`` records, by the rows the entries seen so far carried."""
        if self._rows_per_entry is None:
            return MIN_READ_ENTRIES
        missing = min(max(self.flush_rows - self._rows, 0), READ_ROWS)
        wanted = math.ceil(missing / self._rows_per_entry)
        return min(max(wanted, MIN_READ_ENTRIES), MAX_READ_ENTRIES)

    @property
    def full(self) -> bool:
        """Whether the next flush's worth is held (reads wait for the running flush)."""
        return self._next is not None or self._rows >= self.flush_rows

    def due(self) -> bool:
        """Whether a flush is due: two row groups' worth buffered, or the oldest entry
        has waited ``max_wait_s``."""
        if self._next is not None:
            return True
        if not self._pending:
            return False
        return self.full or self._clock() - self._pending[0].read_at >= self.max_wait_s

    def block_ms(self, default_ms: int) -> int:
        """How long a read may block: never past the oldest entry's flush deadline."""
        if not self._pending:
            return default_ms
        left_s = self._pending[0].read_at + self.max_wait_s - self._clock()
        return max(1, min(default_ms, math.ceil(left_s * 1000)))

    def runs(self) -> set[str]:
        """Runs with entries buffered, being joined or being stored."""
        held = self._pending + self._storing + (self._next.entries if self._next else [])
        return {p.message.run_id for p in held}

    async def flush(self) -> Flushed:
        """Store the oldest entries (up to ``flush_rows`` rows; at least one entry) in
        parallel part transactions. Parts that failed keep their entries buffered."""
        return await self.store(self.take())

    def take(self) -> _Flush:
        """The next flush: the entries :meth:`prepare_next` took, or the oldest ones, up
        to ``flush_rows`` rows (at least one entry), for :meth:`store`. One flush at a
        time: its transactions check the keys the one before committed."""
        if self._storing:
            raise RuntimeError("a flush is still storing its entries")
        taken, self._next = self._next or self._cut(), None
        self._storing = taken.entries
        return taken

    def prepare_next(self) -> None:
        """Take the next flush's entries now and decode and join each of its parts in a
        thread of its own, while the running flush's transactions append: its own
        transactions then only append. Its entries no longer count as buffered."""
        if self._next is None and self._pending:
            self._next = self._cut()
            for part in self._next.parts:
                messages = [p.message.ipc for p in part]
                part.prepared = self._joiner.submit(prepare_records, messages, self._profile)

    @property
    def prepared(self) -> bool:
        """Whether the next flush was taken (:meth:`prepare_next`)."""
        return self._next is not None

    def _cut(self) -> _Flush:
        taken, rows = 0, 0
        while taken < len(self._pending) and (
            taken == 0 or rows + self._pending[taken].rows <= self.flush_rows
        ):
            rows += self._pending[taken].rows
            taken += 1
        batch, self._pending = self._pending[:taken], self._pending[taken:]
        self._rows -= rows
        # A key read twice (e.g. reclaimed while buffered) is stored once; its copies go
        # with the first one's part: acknowledged if it commits, kept if it fails.
        copies: dict[tuple[str, str, int, int], list[_Pending]] = {}
        for pending in batch:
            copies.setdefault(pending.key, []).append(pending)
        return _Flush(batch, copies, self._split([same[0] for same in copies.values()]))

    async def store(self, taken: _Flush) -> Flushed:
        """Store a flush :meth:`take` returned (entries read meanwhile are buffered
        behind it); the entries of parts that failed go back to the buffer's front."""
        try:
            flushed = await self._store_parts(taken)
        finally:
            self._storing = []
        every = self.checkpoint_every_s
        if flushed.rows and every is not None and self._clock() - self._checkpointed_at >= every:
            await asyncio.to_thread(self._checkpoint)
        return flushed

    def _checkpoint(self) -> None:
        """Fold the WAL into the file (in a worker thread). What it holds is committed:
        a checkpoint that fails loses nothing, and the next one is tried a period later.
        DuckDB skips it while another transaction writes."""
        self._checkpointed_at = self._clock()
        cursor = self._con.cursor()
        try:
            cursor.execute("CHECKPOINT")
            self.checkpoints += 1
        except duckdb.Error as exc:
            log.info("checkpoint after a flush not made (records are committed): %s", exc)
        finally:
            cursor.close()

    async def _store_parts(self, taken: _Flush) -> Flushed:
        flushed = Flushed(parts=len(taken.parts))
        outcomes = await asyncio.gather(
            *(asyncio.to_thread(self._store, part) for part in taken.parts),
            return_exceptions=True,
        )
        failed: list[_Pending] = []
        for part, outcome in zip(taken.parts, outcomes, strict=True):
            entries = [copy for first in part for copy in taken.copies[first.key]]
            if isinstance(outcome, BaseException):
                flushed.error = flushed.error or outcome
                failed.extend(entries)
                continue
            run_id = part[0].message.run_id
            flushed.results[run_id] = _merge(flushed.results.get(run_id), outcome)
            for pending in entries:
                flushed.acks.setdefault(pending.stream, []).append(pending.entry_id)
        if failed:
            self._pending[:0] = failed
            self._rows += sum(p.rows for p in failed)
        return flushed

    def _split(self, batch: list[_Pending]) -> list[_Part]:
        """Parts of one run each (results are counted per run), in arrival order; a run
        with at least a row group per extra part is cut into up to ``parts`` of about
        equal rows."""
        by_run: dict[str, list[_Pending]] = {}
        for pending in batch:
            by_run.setdefault(pending.message.run_id, []).append(pending)
        parts: list[_Part] = []
        for entries in by_run.values():
            total = sum(p.rows for p in entries)
            count = max(1, min(self.parts, total // self.part_rows, len(entries)))
            share = total / count
            part = _Part()
            part_rows, cuts = 0, 0
            for pending in entries:
                part.append(pending)
                part_rows += pending.rows
                if cuts < count - 1 and part_rows >= share:
                    parts.append(part)
                    part, part_rows, cuts = _Part(), 0, cuts + 1
            if part:
                parts.append(part)
        return parts

    def _store(self, part: _Part) -> IngestResult:
        """One part's transaction, on a cursor of its own (in a worker thread), with its
        records joined ahead if they were (a join that failed is done again inside)."""
        prepared = None
        if part.prepared is not None:
            with contextlib.suppress(Exception):
                prepared = part.prepared.result()
        cursor = self._con.cursor()
        try:
            return ingest_batches(cursor, [p.message for p in part], self._profile, prepared)
        finally:
            cursor.close()


class _Part(list[_Pending]):
    """One transaction's entries, and the join of their records started ahead."""

    prepared: Future[PreparedRecords | None] | None = None


@dataclass(slots=True)
class _Flush:
    """Entries taken for one flush: all of them, each key's copies, the parts."""

    entries: list[_Pending]
    copies: dict[tuple[str, str, int, int], list[_Pending]]
    parts: list[_Part]


def _merge(a: IngestResult | None, b: IngestResult) -> IngestResult:
    if a is None:
        return b
    per_attempt = dict(a.per_attempt)
    for key, count in b.per_attempt.items():
        per_attempt[key] = per_attempt.get(key, 0) + count
    return IngestResult(
        a.batches + b.batches, a.rows + b.rows, a.duplicates + b.duplicates, per_attempt
    )


async def store_due(
    buffer: RecordBuffer,
    redis: Redis,
    group: str,
    runs: Mapping[str, Ingesting],
    force: bool = False,
    read_meanwhile: Callable[[], Awaitable[object]] | None = None,
) -> int:
    """Flush while a flush is due (every buffered entry if ``force``): report what was
    stored to the runs' coordinators, then acknowledge and delete the entries in Redis.
    Returns the records stored; raises the error of a part that did not commit, after
    what the others committed was reported and acknowledged.

    ``read_meanwhile`` (the control plane's next read of its streams) is awaited again
    and again while a flush runs, until the flush ends or the buffer holds the next one:
    reading and decoding the next entries overlaps DuckDB's append, which runs in threads
    without the GIL. It makes this one flush per call (not with ``force``), so the
    control loop's other work keeps its pace during a backlog."""
    stored = 0
    reading = None if force else read_meanwhile
    while buffer.due() or (force and len(buffer)):
        flushing = asyncio.create_task(buffer.store(buffer.take()))
        try:
            while reading is not None and not flushing.done() and not buffer.full:
                await reading()
            if reading is not None and buffer.full and not flushing.done():
                buffer.prepare_next()  # joined beside this flush's appends
        finally:
            # Whatever a read raised (or a cancellation), the flush's threads end first
            # and what they committed reaches the coordinators.
            flushed = await flushing
            _report(flushed, runs)
        stored += flushed.rows
        for stream, ids in flushed.acks.items():
            await redis.xack(stream, group, *ids)
            # Stored and committed: the payloads need not stay in Redis memory.
            await redis.xdel(stream, *ids)
        if flushed.error is not None:
            raise flushed.error
        if reading is not None:
            break
    return stored


def _report(flushed: Flushed, runs: Mapping[str, Ingesting]) -> None:
    for run_id, result in flushed.results.items():
        coordinator = runs.get(run_id)
        if coordinator is not None:
            coordinator.on_ingested(result.per_attempt, result.rows)
            coordinator.settle()
