"""A shard's publisher on a real Redis: Arrow batches in order with their de-duplication
keys, lifecycle events, publishing only under the shard's claim, and records kept
through a Redis outage until they are in."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine
from typing import Any, TypeVar

import pyarrow as pa
import pytest
from redis.asyncio import Redis

from api.local.redis_server import RedisServer, start_redis_server
from scenarios.wire.contract import (
    EventType,
    RecordBatch,
    decode_event,
    events_stream,
    records_stream,
)
from scenarios.wire.records import ipc_to_table
from workers.client.result import RequestResult
from workers.prompts.plan import PlannedRequest
from workers.runtime.event_loop import new_loop
from workers.shard.ownership import Claim, ClaimLost, RedisUnavailable
from workers.shard.publisher import ShardPublisher
from workers.shard.rows import RowContext, record_row

pytestmark = pytest.mark.integration

MS = 1_000_000
T = TypeVar("T")


def rows(run_id: str, n: int) -> list[dict[str, object]]:
    ctx = RowContext(run_id, 0, "s0", 2, "p", "m", "local", "w", "closed", 1)
    out = []
    for seq in range(n):
        sent = 10_000 * MS + seq * MS
        result = RequestResult(
            intended_start=sent, sent=sent, first_token=sent + MS, end=sent + 2 * MS
        )
        out.append(record_row(ctx, PlannedRequest(seq, 5, 5, ""), result))
    return out


def run(coro: Coroutine[Any, Any, T]) -> T:
    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(coro)


async def batches(redis: Redis, run_id: str) -> list[RecordBatch]:
    return [RecordBatch.decode(fields) for _, fields in await redis.xrange(records_stream(run_id))]


def test_batches_in_order_with_their_keys_and_events(redis_server: RedisServer) -> None:
    run_id = f"pub-{uuid.uuid4().hex[:8]}"

    async def go() -> tuple[list[RecordBatch], list[dict[str, str]], ShardPublisher]:
        redis = Redis.from_url(redis_server.url)
        try:
            async with ShardPublisher(
                redis, run_id, "s0", 2, batch_rows=4, batch_interval_s=60
            ) as pub:
                for row in rows(run_id, 10):
                    pub.add(row)
                await pub.event(EventType.STARTED, worker="w")
            await pub.event(EventType.FINISHED, records=pub.records_published)
            events = [decode_event(f) for _, f in await redis.xrange(events_stream(run_id))]
            return await batches(redis, run_id), events, pub
        finally:
            await redis.aclose()

    published, events, pub = run(go())
    assert [(b.shard_id, b.attempt, b.batch_seq, b.rows) for b in published] == [
        ("s0", 2, 0, 4),
        ("s0", 2, 1, 4),
        ("s0", 2, 2, 2),
    ]
    table = pa.concat_tables([ipc_to_table(b.ipc) for b in published])
    assert table.column("seq").to_pylist() == list(range(10))
    assert (pub.records_published, pub.batches_published, pub.buffered) == (10, 3, 0)
    assert [(e["type"], e["shard_id"], e["attempt"]) for e in events] == [
        ("shard_started", "s0", "2"),
        ("shard_finished", "s0", "2"),
    ]
    assert events[0]["worker"] == "w" and events[1]["records"] == "10"


def test_records_are_published_on_a_timer_without_a_full_batch(redis_server: RedisServer) -> None:
    run_id = f"pub-{uuid.uuid4().hex[:8]}"

    async def go() -> list[RecordBatch]:
        redis = Redis.from_url(redis_server.url)
        try:
            async with ShardPublisher(
                redis, run_id, "s0", 1, batch_rows=1000, batch_interval_s=0.05
            ) as pub:
                pub.add(rows(run_id, 1)[0])
                while pub.buffered:  # the ticker publishes it; no flush is asked for
                    await asyncio.sleep(0.01)
                return await batches(redis, run_id)
        finally:
            await redis.aclose()

    assert [b.rows for b in run(go())] == [1]


def test_an_execution_that_lost_its_claim_publishes_nothing(redis_server: RedisServer) -> None:
    run_id = f"pub-{uuid.uuid4().hex[:8]}"

    async def go() -> tuple[list[RecordBatch], int]:
        redis = Redis.from_url(redis_server.url)
        try:
            claim = Claim(redis, run_id, "s0", "w", owner_ttl_s=30)
            assert await claim.acquire()
            pub = ShardPublisher(redis, run_id, "s0", 1, 2, 60, claim=claim, patience_s=1)
            for row in rows(run_id, 3):
                pub.add(row)
            await pub.flush()
            # The control plane re-dispatched the shard: it removed the claim's keys.
            await redis.delete(claim.owner, claim.token_key)
            for row in rows(run_id, 2):
                pub.add(row)
            with pytest.raises(ClaimLost):
                await pub.flush()
            with pytest.raises(ClaimLost):
                await pub.event(EventType.FINISHED)
            return await batches(redis, run_id), pub.buffered
        finally:
            await redis.aclose()

    published, buffered = run(go())
    assert [b.rows for b in published] == [2, 1]
    assert buffered == 2  # kept, never silently dropped


def test_records_wait_through_a_redis_outage_then_are_published() -> None:
    server = start_redis_server()  # killed by this test: not the session's
    run_id = "outage"

    async def go() -> tuple[list[RecordBatch], list[dict[str, str]]]:
        redis = Redis.from_url(server.url)
        try:
            pub = ShardPublisher(redis, run_id, "s0", 1, batch_rows=100, batch_interval_s=60)
            server.kill()
            for row in rows(run_id, 5):
                pub.add(row)
            pub.patience_s = 0.3
            with pytest.raises(RedisUnavailable):
                await pub.event(EventType.PROGRESS, records=5)
            assert pub.buffered == 5
            # Redis comes back while the publisher is retrying: the event and the
            # records get in, nothing is lost or published twice.
            pub.patience_s = 60
            retrying = asyncio.create_task(pub.event(EventType.PROGRESS, records=5))
            await asyncio.to_thread(server.restart, keep_data=False)
            await retrying
            async with pub:
                pass  # the final flush
            events = [decode_event(f) for _, f in await redis.xrange(events_stream(run_id))]
            return await batches(redis, run_id), events
        finally:
            await redis.aclose()

    try:
        published, events = run(go())
    finally:
        server.kill()
        server.stop()
    assert [(b.batch_seq, b.rows) for b in published] == [(0, 5)]
    assert [e["type"] for e in events] == ["shard_progress"]
