"""A shard execution's claim on its shard, and Redis calls that outlast a Redis outage.

An execution claims its shard with two keys: the owner key (the worker's name, which
the control plane and operators read) and a token key holding a value unique to this
execution. Every entry the execution publishes is added by a script that first checks
the token, so an execution that lost its claim can never publish again:

- Redis restarted empty: the token is gone, and the control plane re-dispatches the
  shard as a new attempt; the old execution stops at its next publish or refresh.
- The control plane re-dispatched the shard (its worker looked dead, or it made no
  progress): it deleted both keys first; the new execution writes its own token.

The owner key expires (a dead worker's claim lapses by itself) and is refreshed with the
token check; the token key lasts as long as a finished shard's done key, so a long
outage of a Redis that keeps its data does not cost a running shard its claim.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.typing import EncodableT, FieldT

from scenarios.errors import Unavailable
from scenarios.settings import env_name
from scenarios.wire.contract import owner_key, token_key

T = TypeVar("T")

log = logging.getLogger("tokenbench.worker")

TOKEN_TTL_S = 7 * 24 * 3600

# Redis unreachable, restarting or still loading its data (BusyLoadingError is a
# ConnectionError): worth retrying. Anything else is a bug or a refusal, raised at once.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    OSError,
)

_CLAIM = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[3]) then
  redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[4])
  return 1
end
return 0
"""

_KEEP = """
if redis.call('GET', KEYS[2]) ~= ARGV[2] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[3])
return 1
"""

_RELEASE = """
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1], KEYS[2])
return 1
"""

_XADD = """
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return false end
return redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', unpack(ARGV, 3))
"""


class ClaimLost(RuntimeError):
    """This execution no longer owns its shard (superseded, or Redis lost its state)."""


class RedisUnavailable(Unavailable, RuntimeError):
    """Redis stayed unreachable for longer than the execution may wait."""


class Claim:
    """One execution's claim on one shard."""

    def __init__(
        self, redis: Redis, run_id: str, shard_id: str, worker: str, owner_ttl_s: float
    ) -> None:
        self.redis = redis
        self.owner = owner_key(run_id, shard_id)
        self.token_key = token_key(run_id, shard_id)
        self.worker = worker
        self.token = uuid.uuid4().hex
        self.owner_ttl = max(1, round(owner_ttl_s))

    async def acquire(self) -> bool:
        """Claim the shard; False if another execution holds it."""
        claimed = await self.redis.eval(
            _CLAIM, 2, self.owner, self.token_key,
            self.worker, self.token, self.owner_ttl, TOKEN_TTL_S,
        )  # fmt: skip
        return bool(claimed)

    async def keep(self) -> bool:
        """Refresh the owner key; False once the claim is lost."""
        kept = await self.redis.eval(
            _KEEP, 2, self.owner, self.token_key, self.worker, self.token, self.owner_ttl
        )
        return bool(kept)

    async def release(self) -> None:
        """Give the shard up (only if this execution still holds it)."""
        await self.redis.eval(_RELEASE, 2, self.owner, self.token_key, self.token)

    async def xadd(self, stream: str, fields: dict[FieldT, EncodableT], maxlen: int) -> None:
        """Append an entry to ``stream`` if this execution still owns its shard;
        :class:`ClaimLost` otherwise."""
        flat: list[Any] = [item for pair in fields.items() for item in pair]
        added = await self.redis.eval(_XADD, 2, stream, self.token_key, self.token, maxlen, *flat)
        if added is None:
            raise ClaimLost(f"{self.owner}: claim lost, entry not published")


async def retrying(call: Callable[[], Awaitable[T]], patience_s: float, what: str) -> T:
    """``call()``, retried with backoff while Redis is unreachable for up to
    ``patience_s``; then :class:`RedisUnavailable` naming ``what``."""
    deadline = time.monotonic() + patience_s
    delay = 0.2
    warned = False
    while True:
        try:
            return await call()
        except TRANSIENT_ERRORS as exc:
            if time.monotonic() + delay > deadline:
                raise RedisUnavailable(
                    f"Redis unreachable for {patience_s:.0f} s "
                    f"({env_name('control.redis_patience_s')}) while {what}: {exc}"
                ) from exc
            if not warned:
                log.warning("Redis unreachable while %s (%s): retrying", what, exc)
                warned = True
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
