"""The gateway's sink on a real Redis: primary records as Arrow batches of the session's
``primary`` shard and capture rows as JSON, flushed in the background, kept through an
outage, and bounded in memory."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import Coroutine
from typing import Any, TypeVar

import pyarrow as pa
import pytest
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from api.local.redis_server import RedisServer, start_redis_server
from scenarios.wire.contract import (
    PRIMARY_SHARD,
    SESSION_ATTEMPT,
    RecordBatch,
    captures_stream,
    decode_captures,
    records_stream,
)
from scenarios.wire.records import ipc_to_table
from workers.client.result import RequestResult
from workers.gateway.sink import RecordSink
from workers.prompts.plan import PlannedRequest
from workers.runtime.event_loop import new_loop
from workers.shard.rows import RowContext, record_row

pytestmark = pytest.mark.integration

T = TypeVar("T")
MS = 1_000_000


def request(run_id: str, seq: int) -> tuple[dict[str, object], dict[str, object]]:
    """One request's primary record and capture row."""
    ctx = RowContext(
        run_id, 0, PRIMARY_SHARD, SESSION_ATTEMPT, "prod", "m", "gateway", "gw", "live", 0,
        request_key=f"k{seq}",
    )  # fmt: skip
    sent = 1_000 * MS + seq * MS
    result = RequestResult(intended_start=sent, sent=sent, first_token=sent + MS, end=sent + 2 * MS)
    return record_row(ctx, PlannedRequest(seq, 5, 5, ""), result), {
        "request_key": f"k{seq}",
        "seq": seq,
    }


def run(coro: Coroutine[Any, Any, T]) -> T:
    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(coro)


async def published(redis: Redis, run_id: str) -> tuple[list[RecordBatch], list[dict[str, Any]]]:
    batches = [RecordBatch.decode(f) for _, f in await redis.xrange(records_stream(run_id))]
    captures = [
        row for _, f in await redis.xrange(captures_stream(run_id)) for row in decode_captures(f)
    ]
    return batches, captures


def keys(batches: list[RecordBatch]) -> list[str]:
    table = pa.concat_tables([ipc_to_table(b.ipc) for b in batches])
    return [str(k) for k in table.column("request_key").to_pylist()]


def test_rows_are_flushed_in_the_background_and_at_close(redis_server: RedisServer) -> None:
    run_id = f"sink-{uuid.uuid4().hex[:8]}"

    async def go() -> tuple[list[RecordBatch], list[dict[str, Any]], RecordSink]:
        redis = Redis.from_url(redis_server.url)
        try:
            sink = RecordSink(redis, run_id, batch_rows=2, interval_s=60)
            sink.start()
            for seq in range(2):
                sink.add(*request(run_id, seq))
            while sink.stats.records_published < 2:  # a full batch wakes the flusher
                await asyncio.sleep(0.01)
            sink.add(*request(run_id, 2))
            await sink.close()  # the rest goes out at close
            return *(await published(redis, run_id)), sink
        finally:
            await redis.aclose()

    batches, captures, sink = run(go())
    assert [(b.shard_id, b.attempt, b.batch_seq, b.rows) for b in batches] == [
        (PRIMARY_SHARD, SESSION_ATTEMPT, 1, 2),
        (PRIMARY_SHARD, SESSION_ATTEMPT, 2, 1),
    ]  # batch numbers from the session's Redis counter, shared by every publisher
    assert keys(batches) == ["k0", "k1", "k2"]
    assert [c["seq"] for c in captures] == [0, 1, 2]
    assert (sink.stats.records_published, sink.stats.captures_published) == (3, 3)


def test_rows_wait_through_an_outage_and_the_oldest_go_past_the_bound() -> None:
    server = start_redis_server()  # killed by this test: not the session's
    run_id = "sink-outage"

    async def go() -> tuple[list[RecordBatch], list[dict[str, Any]], RecordSink]:
        redis = Redis.from_url(server.url)
        try:
            sink = RecordSink(redis, run_id, batch_rows=100, max_buffered=3)
            sink.add(*request(run_id, 0))
            server.kill()
            with pytest.raises((RedisConnectionError, OSError)):
                await sink.flush()
            for seq in range(1, 5):  # five rows wait; room for three
                sink.add(*request(run_id, seq))
            await asyncio.to_thread(server.restart, keep_data=False)
            await sink.flush()
            return *(await published(redis, run_id)), sink
        finally:
            await redis.aclose()

    try:
        batches, captures, sink = run(go())
    finally:
        server.kill()
        server.stop()
    assert keys(batches) == ["k2", "k3", "k4"]  # nothing published twice, the newest kept
    assert [c["seq"] for c in captures] == [2, 3, 4]
    assert (sink.stats.records_dropped, sink.stats.captures_dropped) == (2, 2)


def test_the_bound_holds_when_a_slow_publish_fails_while_rows_arrive(
    redis_server: RedisServer,
) -> None:
    """A flush that hangs on an unresponsive Redis and then fails puts its rows back in
    front of those that arrived meanwhile: the oldest beyond the bound still go."""
    run_id = f"sink-{uuid.uuid4().hex[:8]}"
    silent = socket.socket()  # accepts connections (the kernel does) and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)

    async def go() -> tuple[list[RecordBatch], RecordSink]:
        unresponsive = Redis(
            host="127.0.0.1",
            port=silent.getsockname()[1],
            socket_timeout=0.5,
            retry=Retry(NoBackoff(), 0),
        )
        store = Redis.from_url(redis_server.url)
        try:
            sink = RecordSink(unresponsive, run_id, batch_rows=100, max_buffered=3)
            for seq in range(3):
                sink.add(*request(run_id, seq))
            flushing = asyncio.create_task(sink.flush())
            await asyncio.sleep(0)  # the flush took the three rows and waits on Redis
            for seq in range(3, 6):
                sink.add(*request(run_id, seq))
            with pytest.raises((RedisTimeoutError, RedisConnectionError, OSError)):
                await flushing
            sink.redis = store  # Redis answers again
            await sink.flush()
            batches, _ = await published(store, run_id)
            return batches, sink
        finally:
            await unresponsive.aclose()
            await store.aclose()

    try:
        batches, sink = run(go())
    finally:
        silent.close()
    assert keys(batches) == ["k3", "k4", "k5"]
    assert (sink.stats.records_dropped, sink.stats.captures_dropped) == (3, 3)
