"""What the control plane needs to live through Redis faults (docs/security.md, redis-faults).

- Which errors mean "Redis (or the broker) is unreachable right now": the loop retries.
- A marker key that says Redis still holds the state the control plane keeps there: if
  it is gone (Redis came back empty, or was flushed), the consumer groups, queued tasks,
  streams and attempt counters are gone too.
- Preparing a shard's re-dispatch so that its new attempt is the only one that can
  publish, and is numbered above every attempt already stored.
- Restoring a shadow session's batch counters, so that its next batches are not taken
  for ones already stored.
- Whether a dispatched shard's task is still waiting in its region's queue (then the
  run is waiting for a worker, not stuck).
"""

from __future__ import annotations

import time

import duckdb
from kombu.exceptions import OperationalError
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from scenarios.wire.contract import KEY_PREFIX, attempts_key, batch_seq_key, owner_key, token_key

# Redis or the broker unreachable, restarting or loading its data.
UNREACHABLE_ERRORS: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    OSError,
    OperationalError,
)

STATE_KEY = f"{KEY_PREFIX}:control:state"

# Raise a shard's attempt counter to at least ARGV[1] (never lower it).
_FLOOR = """
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end
return current
"""

QUEUE_SCAN_LIMIT = 10_000
_QUEUE_CHUNK = 500


def is_nogroup(exc: ResponseError) -> bool:
    """True for the error of reading a stream whose consumer group does not exist."""
    return str(exc).startswith("NOGROUP")


async def holds_state(redis: Redis) -> bool:
    """True while Redis still holds the marker the control plane wrote."""
    return bool(await redis.exists(STATE_KEY))


async def mark_state(redis: Redis) -> None:
    """Write the marker (kept until Redis loses its data)."""
    await redis.set(STATE_KEY, f"{time.time():.0f}")


async def prepare_redispatch(redis: Redis, run_id: str, shard_id: str, highest: int) -> None:
    """Before a shard is sent again: drop the previous execution's claim (it stops at its
    next publish), and make sure the next attempt number is above ``highest``."""
    await redis.delete(owner_key(run_id, shard_id), token_key(run_id, shard_id))
    if highest > 0:
        await redis.eval(_FLOOR, 1, attempts_key(run_id, shard_id), highest)


async def restore_batch_counters(redis: Redis, con: duckdb.DuckDBPyConnection, run_id: str) -> None:
    """A session's batch numbers come from Redis counters: after Redis lost them, start
    each above the highest batch already stored (else new batches would be dropped as
    duplicates of stored ones)."""
    rows = con.execute(
        "SELECT shard_id, max(batch_seq) FROM ingested_batches WHERE run_id = ? GROUP BY shard_id",
        [run_id],
    ).fetchall()
    for shard_id, highest in rows:
        await redis.eval(_FLOOR, 1, batch_seq_key(run_id, str(shard_id)), int(highest))


async def task_queued(redis: Redis, queue: str, task_id: str) -> bool:
    """True if the task is in ``queue`` (or the queue is longer than we look through)."""
    needle = task_id.encode()
    for start in range(0, QUEUE_SCAN_LIMIT, _QUEUE_CHUNK):
        chunk = await redis.lrange(queue, start, start + _QUEUE_CHUNK - 1)
        if any(needle in (e if isinstance(e, bytes) else e.encode()) for e in chunk):
            return True
        if len(chunk) < _QUEUE_CHUNK:
            return False
    return True
