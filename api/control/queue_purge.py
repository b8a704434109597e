"""Removing a closed run's Celery messages from Redis (docs/security.md, Bounds).

kombu's Redis transport keeps a queue as Redis lists: the queue's name for priority 0
(every shard task) and ``<queue>\\x06\\x16<p>`` for the priority steps 3, 6 and 9; each
element is a JSON message whose ``headers.id`` is the task id (``shard_task_id``). A
message a worker has taken but not acknowledged sits in the ``unacked`` hash (delivery
tag -> ``[message, exchange, routing_key]``) with its tag in the ``unacked_index`` sorted
set; kombu puts it back on its queue when the worker dies or its visibility timeout
passes. A shard queued for a region without a live worker would otherwise stay in Redis
for good after its run is cancelled or failed.

Removal is by value (``LREM`` of the exact element, ``HDEL`` of the exact tag), so a
message a worker pops meanwhile is simply not found; nothing is removed by position.
Scanning goes from the head, where producers push (a push only makes us read an element
twice), while workers pop from the tail.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from redis.asyncio import Redis

from scenarios.wire.shard_payload import message_task_id, of_run

# kombu.transport.redis.Channel's defaults (sep, priority_steps, unacked keys).
PRIORITY_SEP: Final = "\x06\x16"
PRIORITY_STEPS: Final = (0, 3, 6, 9)
UNACKED_KEY: Final = "unacked"
UNACKED_INDEX_KEY: Final = "unacked_index"
_CHUNK: Final = 500


@dataclass
class Purged:
    """What was removed: queued messages, and unacknowledged ones."""

    queued: int = 0
    unacked: int = 0


def priority_lists(queue: str) -> list[str]:
    """The Redis lists of ``queue``, one per kombu priority step."""
    return [queue if p == 0 else f"{queue}{PRIORITY_SEP}{p}" for p in PRIORITY_STEPS]


async def purge_run_messages(redis: Redis, run_id: str, queues: Iterable[str]) -> Purged:
    """Remove every message of run ``run_id`` from ``queues`` and the unacked hash."""
    purged = Purged()
    for queue in queues:
        for key in priority_lists(queue):
            purged.queued += await _purge_list(redis, key, run_id)
    purged.unacked = await _purge_unacked(redis, run_id)
    return purged


async def _purge_list(redis: Redis, key: str, run_id: str) -> int:
    removed = 0
    start = 0
    while True:
        chunk: list[Any] = await redis.lrange(key, start, start + _CHUNK - 1)
        if not chunk:
            return removed
        here = 0
        for raw in chunk:
            if of_run(message_task_id(raw), run_id):
                here += int(await redis.lrem(key, 1, raw))
        removed += here
        start += len(chunk) - here  # what was removed no longer shifts the next chunk


async def _purge_unacked(redis: Redis, run_id: str) -> int:
    tags = [
        tag
        async for tag, raw in redis.hscan_iter(UNACKED_KEY, count=_CHUNK)
        if of_run(message_task_id(raw), run_id)
    ]
    if not tags:
        return 0
    # The index first: kombu restores a tag it finds there from the hash.
    await redis.zrem(UNACKED_INDEX_KEY, *tags)
    return int(await redis.hdel(UNACKED_KEY, *tags))
