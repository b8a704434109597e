"""The gateway's records and captures, batched to the session's Redis Streams.

Primary records go to the session's record stream as Arrow batches of shard
``primary`` (``workers.gateway.shadow.publish_rows``); capture rows (one per request: when it
arrived, whether it was sampled, the prompt's length and hash, its text only with
``privacy.store_text``) go to the session's capture stream as JSON. Both are flushed
every ``interval_s`` or ``batch_rows`` rows, off the request path. If Redis is
unreachable the rows wait in memory, at most ``max_buffered`` of each kind; beyond
that the oldest are dropped and counted, so a long broker outage cannot exhaust the
gateway's memory and never delays a response.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.exceptions import RedisError

from scenarios.wire.contract import PRIMARY_SHARD, STREAM_MAXLEN, capture_fields, captures_stream
from workers.gateway.shadow import publish_rows

log = logging.getLogger("tokenbench.gateway")


@dataclass
class SinkStats:
    """What the sink published and dropped."""

    records_published: int = 0
    captures_published: int = 0
    records_dropped: int = 0
    captures_dropped: int = 0
    publish_errors: int = 0


class RecordSink:
    """Buffers the gateway's rows and publishes them in batches."""

    def __init__(
        self,
        redis: Redis,
        run_id: str,
        batch_rows: int = 256,
        interval_s: float = 0.5,
        max_buffered: int = 100_000,
    ) -> None:
        self.redis = redis
        self.run_id = run_id
        self.batch_rows = batch_rows
        self.interval_s = interval_s
        self.max_buffered = max_buffered
        self.stats = SinkStats()
        self._records: list[dict[str, object]] = []
        self._captures: list[dict[str, object]] = []
        self._wake = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the background flusher (on the running loop)."""
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        """Flush what is buffered and stop."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            await self._task
        with contextlib.suppress(RedisError, OSError):
            await self.flush()

    def add(self, record: dict[str, object], capture: dict[str, object]) -> None:
        """Queue one request's primary record and capture row."""
        self._records.append(record)
        self._captures.append(capture)
        self._bound()
        if len(self._records) >= self.batch_rows:
            self._wake.set()

    def _bound(self) -> None:
        """Drop the oldest rows beyond ``max_buffered`` of each kind, counted."""
        extra = len(self._records) - self.max_buffered
        if extra > 0:
            del self._records[:extra]
            self.stats.records_dropped += extra
        extra = len(self._captures) - self.max_buffered
        if extra > 0:
            del self._captures[:extra]
            self.stats.captures_dropped += extra

    async def flush(self) -> None:
        """Publish the buffered rows (put back on failure, to be retried)."""
        records, self._records = self._records, []
        captures, self._captures = self._captures, []
        try:
            await publish_rows(self.redis, self.run_id, PRIMARY_SHARD, records)
        except BaseException:
            # Rows arrived while this flush waited: together they may exceed the bound.
            self._records[:0] = records
            self._captures[:0] = captures
            self._bound()
            raise
        self.stats.records_published += len(records)
        if captures:
            try:
                await self.redis.xadd(
                    captures_stream(self.run_id),
                    capture_fields(captures),
                    maxlen=STREAM_MAXLEN,
                    approximate=True,
                )
            except BaseException:
                self._captures[:0] = captures
                self._bound()
                raise
            self.stats.captures_published += len(captures)

    async def _run(self) -> None:
        while not self._closing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval_s)
            self._wake.clear()
            try:
                await self.flush()
            except (RedisError, OSError) as exc:
                self.stats.publish_errors += 1
                log.warning("gateway records not published yet: %s", type(exc).__name__)
