"""api/control/redis_faults.py against a real Redis (a database of its own on the
session's server, so that flushing it touches no other test's control plane): the state
marker, re-dispatch preparation, batch counters restored from DuckDB, queued-task
lookup, and which errors mean "unreachable"."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
import redis
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ResponseError

from analytics.store.db import connect
from api.control import redis_faults
from api.local.redis_server import RedisServer, free_port
from scenarios.wire.contract import attempts_key, batch_seq_key, owner_key, token_key

pytestmark = pytest.mark.integration

OWN_DB = 9


@pytest.fixture
def url(redis_server: RedisServer) -> Iterator[str]:
    """An empty Redis database of this test's own."""
    own = f"redis://127.0.0.1:{redis_server.port}/{OWN_DB}"
    flush = redis.Redis.from_url(own)
    flush.flushdb()
    yield own
    flush.flushdb()
    flush.close()


def _run(url: str, body: Callable[[Redis], Awaitable[None]]) -> None:
    async def main() -> None:
        client = Redis.from_url(url)
        try:
            await body(client)
        finally:
            await client.aclose()

    asyncio.run(main())


def test_the_marker_says_whether_redis_still_holds_the_state(url: str) -> None:
    async def body(client: Redis) -> None:
        assert not await redis_faults.holds_state(client)
        before = time.time()
        await redis_faults.mark_state(client)
        assert await redis_faults.holds_state(client)
        assert float(await client.get(redis_faults.STATE_KEY)) >= before - 1
        await client.flushdb()  # Redis came back empty
        assert not await redis_faults.holds_state(client)

    _run(url, body)


def test_a_redispatch_drops_the_old_claim_and_numbers_above_every_attempt(url: str) -> None:
    async def body(client: Redis) -> None:
        await client.set(owner_key("r", "s"), "worker-1")
        await client.set(token_key("r", "s"), "token-1")
        await client.set(attempts_key("r", "s"), 2)
        await redis_faults.prepare_redispatch(client, "r", "s", highest=5)
        assert await client.exists(owner_key("r", "s"), token_key("r", "s")) == 0
        assert await client.incr(attempts_key("r", "s")) == 6  # the next attempt
        await redis_faults.prepare_redispatch(client, "r", "s", highest=3)
        assert int(await client.get(attempts_key("r", "s"))) == 6  # never lowered
        # Nothing stored yet for a shard: its counter is left alone.
        await redis_faults.prepare_redispatch(client, "r", "fresh", highest=0)
        assert await client.exists(attempts_key("r", "fresh")) == 0

    _run(url, body)


def test_batch_counters_start_above_the_batches_stored(url: str, tmp_path: Path) -> None:
    con = connect(tmp_path / "faults.duckdb")
    rows = [("sess", "a", 1, 7), ("sess", "a", 1, 2), ("sess", "b", 1, 3), ("other", "c", 1, 50)]
    for run_id, shard_id, attempt, seq in rows:
        con.execute(
            "INSERT INTO ingested_batches (run_id, shard_id, attempt, batch_seq, rows, "
            "ingested_at) VALUES (?, ?, ?, ?, 1, now())",
            [run_id, shard_id, attempt, seq],
        )

    async def body(client: Redis) -> None:
        await client.set(batch_seq_key("sess", "b"), 10)  # ahead already: kept
        await redis_faults.restore_batch_counters(client, con, "sess")
        assert await client.incr(batch_seq_key("sess", "a")) == 8
        assert await client.incr(batch_seq_key("sess", "b")) == 11
        assert await client.exists(batch_seq_key("other", "c")) == 0  # another run's

    try:
        _run(url, body)
    finally:
        con.close()


def test_a_task_is_found_in_its_queue(url: str) -> None:
    async def body(client: Redis) -> None:
        entries = [f'{{"headers": {{"id": "task-{i}"}}}}' for i in range(700)]
        await client.rpush("queue", *entries)
        assert await redis_faults.task_queued(client, "queue", "task-3")
        assert await redis_faults.task_queued(client, "queue", "task-699")  # a later chunk
        assert not await redis_faults.task_queued(client, "queue", "task-700")
        assert not await redis_faults.task_queued(client, "empty-queue", "task-3")
        # A queue longer than is looked through: the task may be in it.
        filler = ["{}"] * (redis_faults.QUEUE_SCAN_LIMIT + 1)
        await client.rpush("long-queue", *filler)
        assert await redis_faults.task_queued(client, "long-queue", "task-3")

    _run(url, body)


def test_a_missing_consumer_group_is_told_from_other_refusals(url: str) -> None:
    async def body(client: Redis) -> None:
        await client.xadd("stream", {"k": "v"})
        with pytest.raises(ResponseError) as missing:
            await client.xreadgroup("no-group", "me", {"stream": ">"})
        assert redis_faults.is_nogroup(missing.value)
        await client.set("plain", "x")
        with pytest.raises(ResponseError) as wrong_type:
            await client.xadd("plain", {"k": "v"})
        assert not redis_faults.is_nogroup(wrong_type.value)

    _run(url, body)


def test_a_redis_nobody_answers_is_unreachable() -> None:
    async def body() -> None:
        # One try: the control loop does its own retrying, once a second.
        client = Redis(port=free_port(), socket_connect_timeout=2, retry=Retry(NoBackoff(), 0))
        try:
            with pytest.raises(redis_faults.UNREACHABLE_ERRORS):
                await client.ping()
        finally:
            await client.aclose()

    asyncio.run(body())
