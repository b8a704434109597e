"""api/control/queue_purge.py on real Redis with real kombu messages: a closed run's
tasks are removed from every priority list of its queues and from the unacknowledged
hash (so kombu cannot put them back), and other runs' tasks stay."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
import redis
from kombu import Connection
from redis.asyncio import Redis as AsyncRedis

from api.control.queue_purge import (
    UNACKED_INDEX_KEY,
    UNACKED_KEY,
    priority_lists,
    purge_run_messages,
)
from api.local.redis_server import RedisServer
from scenarios.wire.contract import RUN_SHARD, region_queue, shard_task_id
from scenarios.wire.shard_payload import message_task_id
from tests.support.celery_sender import close, sending_app

pytestmark = pytest.mark.integration


@pytest.fixture
def queue() -> str:
    return region_queue(f"purge-{uuid.uuid4().hex[:8]}")


@pytest.fixture
def broker(redis_server: RedisServer, queue: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_server.url)
    yield client
    client.delete(*priority_lists(queue))
    client.close()


def task_ids(client: redis.Redis, queue: str) -> list[str]:
    return [
        str(message_task_id(raw))
        for key in priority_lists(queue)
        for raw in client.lrange(key, 0, -1)
    ]


def purge(url: str, run_id: str, queue: str) -> tuple[int, int]:
    async def go() -> tuple[int, int]:
        client = AsyncRedis.from_url(url)
        try:
            purged = await purge_run_messages(client, run_id, [queue])
            return purged.queued, purged.unacked
        finally:
            await client.aclose()

    return asyncio.run(go())


def test_a_runs_queued_and_unacknowledged_tasks_are_removed(
    redis_server: RedisServer, broker: redis.Redis, queue: str
) -> None:
    gone, kept = "20261204-070000-aaaaaa", "20261204-070000-bbbbbb"
    sender = sending_app(redis_server.url)
    try:
        for run_id in (gone, kept):
            for index, priority in enumerate((None, 0, 5, 9)):
                sender.send_task(
                    RUN_SHARD,
                    args=[{"pad": "p" * 10_000}],
                    queue=queue,
                    task_id=shard_task_id(run_id, f"s{index}"),
                    priority=priority,
                )
    finally:
        close(sender)
    assert broker.exists(priority_lists(queue)[1])  # a priority-3 list (kombu: 5 -> 3)
    before = task_ids(broker, queue)
    assert len(before) == 8

    # A consumer takes one task of each run without acknowledging it (a dead worker's).
    with Connection(redis_server.url) as connection:
        simple = connection.SimpleQueue(queue, no_ack=False)
        taken = [simple.get(timeout=5), simple.get(timeout=5)]
        taken_ids = {m.headers["id"] for m in taken}
        unacked_before = {
            str(message_task_id(raw)) for raw in broker.hvals(UNACKED_KEY)
        } & taken_ids
        assert unacked_before == taken_ids

        queued, unacked = purge(redis_server.url, gone, queue)

        left = task_ids(broker, queue)
        assert all(t.startswith(f"{kept}/") for t in left)
        assert len(left) == 4 - sum(t.startswith(f"{kept}/") for t in taken_ids)
        assert queued == 4 - sum(t.startswith(f"{gone}/") for t in taken_ids)
        assert unacked == sum(t.startswith(f"{gone}/") for t in taken_ids)
        remaining = {str(message_task_id(raw)) for raw in broker.hvals(UNACKED_KEY)}
        assert not any(t.startswith(f"{gone}/") for t in remaining)
        tags = {t.decode() for t in broker.zrange(UNACKED_INDEX_KEY, 0, -1)}
        assert all(
            not str(message_task_id(broker.hget(UNACKED_KEY, tag) or b"")).startswith(gone)
            for tag in tags
        )
        # The kept run's unacknowledged task is still there to be restored or acked.
        for message in taken:
            message.ack()
        simple.close()
    assert purge(redis_server.url, gone, queue) == (0, 0)  # nothing more to remove
