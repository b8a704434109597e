"""Publishing a shard's results: Arrow record batches and lifecycle events on Redis Streams.

Records are buffered and flushed as one Arrow IPC batch every ``batch_rows`` records or
``batch_interval_s`` seconds, whichever comes first. Each batch carries (shard, attempt,
batch sequence), the key the ingestor de-duplicates on, so a re-delivered batch is
never stored twice.

While Redis is unreachable, records stay buffered and publishing is retried for up to
``patience_s`` (``TOKENBENCH__CONTROL__REDIS_PATIENCE_S``); after that, or once the
execution lost its claim on the shard (``workers/shard/ownership.py``), publishing raises
instead of dropping anything silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from redis.asyncio import Redis
from redis.typing import EncodableT, FieldT

from scenarios.wire.contract import (
    STREAM_MAXLEN,
    EventType,
    RecordBatch,
    event_fields,
    events_stream,
    records_stream,
)
from workers.shard.ownership import Claim, ClaimLost, RedisUnavailable, retrying


class ShardPublisher:
    """Buffers one shard attempt's records and publishes batches and events."""

    def __init__(
        self,
        redis: Redis,
        run_id: str,
        shard_id: str,
        attempt: int,
        batch_rows: int,
        batch_interval_s: float,
        claim: Claim | None = None,
        patience_s: float = 60.0,
    ) -> None:
        self.redis = redis
        self.claim = claim
        self.patience_s = patience_s
        self.run_id = run_id
        self.shard_id = shard_id
        self.attempt = attempt
        self.batch_rows = batch_rows
        self.batch_interval_s = batch_interval_s
        self.records_published = 0
        self.batches_published = 0
        self._rows: list[dict[str, object]] = []
        self._flush_lock = asyncio.Lock()
        self._ticker: asyncio.Task[None] | None = None
        self._closing = asyncio.Event()
        self._pending: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> ShardPublisher:
        self._ticker = asyncio.create_task(self._tick())
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        # Stopped by an event rather than cancel(): see workers/shard/execute.py.
        self._closing.set()
        if self._ticker is not None:
            await self._ticker
        # A failed background flush left its rows buffered; the final flush retries them.
        await asyncio.gather(*self._pending, return_exceptions=True)
        if exc_type is not None and issubclass(exc_type, ClaimLost | RedisUnavailable):
            return  # nothing more can be published: the caller reports it
        await retrying(self.flush, self.patience_s, f"publishing {self.buffered} records")

    @property
    def buffered(self) -> int:
        """Records not published yet."""
        return len(self._rows)

    def add(self, row: dict[str, object]) -> None:
        """Queue one record; a full buffer is flushed in the background (one flush at a
        time: during a Redis outage records wait in the buffer)."""
        self._rows.append(row)
        if len(self._rows) >= self.batch_rows and not self._pending:
            task = asyncio.get_running_loop().create_task(self.flush())
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def flush(self) -> None:
        """Publish buffered records in batches of at most ``batch_rows`` (no-op when
        empty); records stay buffered until their batch is in Redis."""
        async with self._flush_lock:
            while self._rows:
                rows = self._rows[: self.batch_rows]
                batch = RecordBatch.of_rows(
                    self.shard_id, self.attempt, self.batches_published, rows
                )
                await self._xadd(records_stream(self.run_id), batch.fields())
                # Only the flush (under the lock) removes rows; add() only appends.
                del self._rows[: len(rows)]
                self.batches_published += 1
                self.records_published += len(rows)

    async def _xadd(self, stream: str, fields: dict[FieldT, EncodableT]) -> None:
        if self.claim is None:
            await self.redis.xadd(stream, fields, maxlen=STREAM_MAXLEN, approximate=True)
        else:
            await self.claim.xadd(stream, fields, STREAM_MAXLEN)

    async def _tick(self) -> None:
        while not self._closing.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), self.batch_interval_s)
            if not self._closing.is_set():
                with contextlib.suppress(Exception):  # rows stay buffered; the final flush retries
                    await self.flush()

    async def event(self, kind: EventType, **fields: str | int | float) -> None:
        """Publish a lifecycle event of this shard attempt, retrying while Redis is
        unreachable (for up to ``patience_s``)."""
        stream, entry = self._event_entry(kind, fields)
        await retrying(lambda: self._xadd(stream, entry), self.patience_s, f"publishing {kind}")

    async def try_event(self, kind: EventType, **fields: str | int | float) -> None:
        """Publish a periodic event once: one lost to a Redis outage is not worth waiting
        for (the error is raised)."""
        stream, entry = self._event_entry(kind, fields)
        await self._xadd(stream, entry)

    def _event_entry(
        self, kind: EventType, fields: dict[str, str | int | float]
    ) -> tuple[str, dict[FieldT, EncodableT]]:
        entry = event_fields(kind, self.shard_id, self.attempt, time.time(), fields)
        return events_stream(self.run_id), entry
