"""The control plane's stream consumer: every active run's streams, read with one group.

Each run has an event stream and a record stream, and either a metrics stream (server
telemetry scraped by its shards, docs/telemetry.md) or, for a shadow-traffic session
(docs/shadow.md), a captures stream (the gateway's per-request captures). One consumer
group (``GROUP``) reads them all: record batches go to the record buffer
(``api/control/record_buffer.py``) and are acknowledged once stored; events are applied
to the run's coordinator, captures and scrapes stored, and acknowledged right after.

A restarted control plane takes over the entries a previous one read but never
acknowledged (:meth:`StreamConsumer.reclaim`, XAUTOCLAIM), so a restart loses and
doubles nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import duckdb
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from analytics.shadow.capture import ingest_captures
from analytics.telemetry.ingest import ingest_scrapes
from api.control.coordinator import Coordinator, about_run
from api.control.record_buffer import FLUSH_POLL_MS, RecordBuffer, store_due
from api.control.session_coordinator import SessionCoordinator
from scenarios.wire.contract import (
    MetricsBatch,
    StreamKind,
    captures_stream,
    decode_captures,
    decode_event,
    events_stream,
    metrics_stream,
    parse_stream,
    records_stream,
)

GROUP = "control"
READ_BLOCK_MS = 200
# Metrics-stream entries read per call while draining a closing run.
MAX_DRAIN_ENTRIES = 500
# Entries claimed per XAUTOCLAIM call when taking over a previous consumer's.
RECLAIM_COUNT = 500

Entries = list[tuple[bytes, dict[bytes, bytes]]]


def run_streams(run_id: str, session: bool) -> tuple[str, ...]:
    """The streams of a run: events and records, then a session's captures or a planned
    run's server telemetry."""
    third = captures_stream(run_id) if session else metrics_stream(run_id)
    return (events_stream(run_id), records_stream(run_id), third)


class StreamConsumer:
    """Reads, applies and acknowledges the streams of the runs in ``runs`` (the control
    plane's own mapping of active runs, shared with it)."""

    def __init__(
        self,
        redis: Redis,
        con: duckdb.DuckDBPyConnection,
        runs: Mapping[str, Coordinator],
        consumer: str,
        records: RecordBuffer | None = None,
    ) -> None:
        self.redis = redis
        self.con = con
        self.runs = runs
        self.consumer = consumer
        # Read, stored in large parallel commits (another buffer: benchmarks/ingest.py).
        self.records = records if records is not None else RecordBuffer(con)

    def streams(self, run_id: str) -> tuple[str, ...]:
        """The streams of an active run."""
        return run_streams(run_id, isinstance(self.runs.get(run_id), SessionCoordinator))

    async def create_groups(self, run_id: str, session: bool | None = None) -> None:
        """The consumer group on each of the run's streams (created with them).
        ``session`` says what the run is before it is in ``runs`` (default: as there)."""
        streams = self.streams(run_id) if session is None else run_streams(run_id, session)
        for stream in streams:
            try:
                await self.redis.xgroup_create(stream, GROUP, id="0", mkstream=True)
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

    async def reclaim(self, run_id: str) -> None:
        """Take over entries a previous control plane read but never acknowledged."""
        for stream in self.streams(run_id):
            start = "0-0"
            while True:
                answer: Any = await self.redis.xautoclaim(
                    stream,
                    GROUP,
                    self.consumer,
                    min_idle_time=0,
                    start_id=start,
                    count=RECLAIM_COUNT,
                )
                start, entries = answer[0], answer[1]
                live = [(i, f) for i, f in entries if f]  # deleted entries come back empty
                if live:
                    await self.handle(stream, live)
                if start in (b"0-0", "0-0") or not entries:
                    break

    async def consume(self) -> None:
        """One read of every active run's streams, applied; records stored when due,
        the streams read again while they are (``store_due``: the next entries are read
        and decoded while DuckDB appends, not after)."""
        streams: dict[Any, Any] = {}
        for run_id in self.runs:
            for stream in self.streams(run_id):
                streams[stream] = ">"
        if not streams:
            return
        if not self.records.due():
            await self._read(streams, self.records.block_ms(READ_BLOCK_MS))

        async def read_meanwhile() -> None:
            await self._read(streams, FLUSH_POLL_MS)

        await store_due(self.records, self.redis, GROUP, self.runs, read_meanwhile=read_meanwhile)

    async def _read(self, streams: dict[Any, Any], block_ms: int) -> None:
        answer: Any = await self.redis.xreadgroup(
            GROUP, self.consumer, streams, count=self.records.read_count(), block=block_ms
        )
        for stream, entries in answer or []:
            await self.handle(stream.decode() if isinstance(stream, bytes) else stream, entries)

    async def store_due(self, force: bool = False) -> int:
        """Store the buffered records when due (all of them if ``force``)."""
        return await store_due(self.records, self.redis, GROUP, self.runs, force=force)

    async def handle(self, stream: str, entries: Entries) -> None:
        """Apply one stream's entries to its run, then acknowledge them."""
        run_id, kind = parse_stream(stream)
        with about_run(run_id):
            await self._apply(stream, run_id, kind, entries)

    async def _apply(self, stream: str, run_id: str, kind: StreamKind, entries: Entries) -> None:
        coordinator = self.runs.get(run_id)
        if kind is StreamKind.RECORDS and coordinator is not None:
            # Acknowledged once stored, in the buffer's next flush (record_buffer.py).
            self.records.add(stream, run_id, entries)
            return
        if coordinator is not None and entries:
            if kind is StreamKind.CAPTURES:
                rows = [row for _, fields in entries for row in decode_captures(fields)]
                ingest_captures(self.con, rows)
            elif kind is StreamKind.METRICS:
                # Server telemetry (docs/telemetry.md): the read's entries in one
                # transaction, on a cursor of its own in a thread (as record parts are).
                payloads = [MetricsBatch.decode(f).ipc for _, f in entries]
                await asyncio.to_thread(_store_scrapes, self.con, payloads)
            else:
                for _, fields in entries:
                    coordinator.on_event(decode_event(fields))
            coordinator.settle()
        if entries:
            ids = [entry_id for entry_id, _ in entries]
            await self.redis.xack(stream, GROUP, *ids)
            if kind in (StreamKind.RECORDS, StreamKind.METRICS):
                # Stored and committed: the payloads need not stay in Redis memory.
                await self.redis.xdel(stream, *ids)

    async def drain_metrics(self, run_id: str) -> None:
        """Store the scrapes still on a closing run's metrics stream: a shard publishes
        its last ones just before ``finished``, and a backlog read behind the events
        would otherwise be deleted with the stream."""
        stream = metrics_stream(run_id)
        while True:
            answer: Any = await self.redis.xreadgroup(
                GROUP, self.consumer, {stream: ">"}, count=MAX_DRAIN_ENTRIES
            )
            entries = answer[0][1] if answer else []
            if not entries:
                return
            await self.handle(stream, entries)


def _store_scrapes(con: duckdb.DuckDBPyConnection, payloads: list[bytes]) -> None:
    cursor = con.cursor()
    try:
        ingest_scrapes(cursor, payloads)
    finally:
        cursor.close()
