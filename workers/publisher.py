"""Publishing a shard's results: Arrow record batches and lifecycle events on Redis Streams.

Records are buffered and flushed as one Arrow IPC batch every ``batch_rows`` records or
``batch_interval_s`` seconds, whichever comes first. Each batch carries (shard, attempt,
batch sequence), the key the ingestor de-duplicates on, so a re-delivered batch is
never stored twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from redis.asyncio import Redis
from redis.typing import EncodableT, FieldT

from scenarios.records import batch_to_ipc, records_to_batch
from scenarios.wire import EventType, events_stream, records_stream

# Streams are trimmed only well behind the consumers; a backlog this deep means the
# ingestor is down, and nothing must be lost before it catches up.
STREAM_MAXLEN = 1_000_000


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
    ) -> None:
        self.redis = redis
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

    async def __aexit__(self, *exc_info: object) -> None:
        # Stopped by an event rather than cancel(): see workers/shard.py.
        self._closing.set()
        if self._ticker is not None:
            await self._ticker
        # A failed background flush put its rows back; the final flush retries them.
        await asyncio.gather(*self._pending, return_exceptions=True)
        await self.flush()

    def add(self, row: dict[str, object]) -> None:
        """Queue one record; a full buffer is flushed in the background."""
        self._rows.append(row)
        if len(self._rows) >= self.batch_rows:
            task = asyncio.get_running_loop().create_task(self.flush())
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def flush(self) -> None:
        """Publish buffered records as one batch (no-op when empty)."""
        async with self._flush_lock:
            if not self._rows:
                return
            rows, self._rows = self._rows, []
            payload = batch_to_ipc(records_to_batch(rows))
            try:
                await self._xadd_batch(rows, payload)
            except BaseException:
                self._rows[:0] = rows  # keep them for the next flush: never drop a record
                raise
            self.batches_published += 1
            self.records_published += len(rows)

    async def _xadd_batch(self, rows: list[dict[str, object]], payload: bytes) -> None:
        await self.redis.xadd(
            records_stream(self.run_id),
            {
                "shard_id": self.shard_id,
                "attempt": self.attempt,
                "batch_seq": self.batches_published,
                "rows": len(rows),
                "ipc": payload,
            },
            maxlen=STREAM_MAXLEN,
            approximate=True,
        )

    async def _tick(self) -> None:
        while not self._closing.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), self.batch_interval_s)
            if not self._closing.is_set():
                with contextlib.suppress(Exception):  # rows stay buffered; the final flush retries
                    await self.flush()

    async def event(self, kind: EventType, **fields: str | int | float) -> None:
        """Publish a lifecycle event of this shard attempt."""
        entry: dict[FieldT, EncodableT] = {
            "type": kind.value,
            "shard_id": self.shard_id,
            "attempt": self.attempt,
            "at": time.time(),
        }
        entry.update(fields)
        await self.redis.xadd(
            events_stream(self.run_id),
            entry,
            maxlen=STREAM_MAXLEN,
            approximate=True,
        )
