"""How the control loop recovers: from Redis faults, lost workers and stalled runs.

Redis faults (docs/security.md, redis-faults; the primitives are
``api/control/redis_faults.py``): while Redis is unreachable the loop retries every
second; when it is back, it reclaims what it had read but not acknowledged and sends
what it could not. When Redis lost its state (a marker key or a consumer group is gone),
it re-creates the groups and re-dispatches every shard not yet settled in DuckDB as a
new attempt (or fails it, saying how many requests are missing).

Workers: the shards of a worker whose heartbeat vanished are re-dispatched (at most
``max_attempts`` executions), and the pending shards of a region that has no live
worker for ``no_worker_grace_s`` fail. A watchdog handles a run without progress for
``stall_timeout_s``: its stuck shards are re-dispatched once, then failed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping

import duckdb
from redis.asyncio import Redis

from api.control.coordinator import Coordinator, ShardProgress
from api.control.dispatch import Dispatcher, live_worker_count
from api.control.redis_faults import (
    UNREACHABLE_ERRORS,
    holds_state,
    mark_state,
    restore_batch_counters,
    task_queued,
)
from api.control.session_coordinator import SessionCoordinator
from api.control.streams import StreamConsumer
from scenarios.settings import ControlSettings, env_name
from scenarios.wire.contract import (
    IN_FLIGHT,
    ShardState,
    cancel_key,
    heartbeat_key,
    owner_key,
    region_queue,
    shard_task_id,
)

log = logging.getLogger("tokenbench.control")
# How long a cancel key lives: as long as any straggler task may be redelivered.
CANCEL_TTL_S = 24 * 3600


class Recovery:
    """What the control loop does about Redis outages and lost state, lost workers and
    runs without progress, for the runs in ``runs`` (the control plane's, shared)."""

    def __init__(
        self,
        redis: Redis,
        con: duckdb.DuckDBPyConnection,
        settings: ControlSettings,
        runs: Mapping[str, Coordinator],
        streams: StreamConsumer,
        dispatcher: Dispatcher,
    ) -> None:
        self.redis = redis
        self.con = con
        self.settings = settings
        self.runs = runs
        self.streams = streams
        self.dispatcher = dispatcher
        self.unreachable_since: float | None = None
        self._reachable_at = 0.0  # when Redis answered again after an outage
        self._state_marked = False  # the Redis state marker was seen or written
        self._no_worker_since: dict[str, float] = {}

    # ------------------------------------------------------------------ Redis faults

    async def unreachable(self, exc: BaseException) -> None:
        """Redis did not answer: note when the outage began, wait a second."""
        if self.unreachable_since is None:
            self.unreachable_since = time.monotonic()
            log.warning("Redis unreachable (%s): retrying every second", exc)
        await asyncio.sleep(1.0)

    async def reachable_again(self) -> None:
        """Redis answers again: unless it lost its state, take back what was read but
        not acknowledged, and send what could not be sent."""
        since = self.unreachable_since or time.monotonic()
        if not await self.check_state(lost_if_missing=self._state_marked):
            for run_id in list(self.runs):
                await self.streams.reclaim(run_id)
            for shard in list(self.dispatcher.unsent.values()):
                if shard.state == ShardState.DISPATCHED and shard.spec.run_id in self.runs:
                    await self.dispatcher.send_shard(shard)
        self.dispatcher.unsent.clear()
        log.warning("Redis reachable again after %.0f s", time.monotonic() - since)
        self.unreachable_since = None
        self._reachable_at = time.monotonic()

    async def check_state(self, lost_if_missing: bool | None = None) -> bool:
        """True (after rebuilding) when Redis lost the state kept there: its marker is
        missing although it was there before (``lost_if_missing``; default: whether it
        was seen or written by this control plane)."""
        if lost_if_missing is None:
            lost_if_missing = self._state_marked
        if await holds_state(self.redis):
            self._state_marked = True
            return False
        lost = lost_if_missing and bool(self.runs)
        if lost:
            await self.state_lost("Redis came back without its data")
        await mark_state(self.redis)
        self._state_marked = True
        return lost

    async def group_missing(self) -> None:
        """A read named a stream without its consumer group. Only when Redis lost its
        marker too did it lose its state; otherwise a stream was deleted while Redis kept
        everything else (by hand, or by eviction): its groups are made again, and the
        shards, whose tasks and claims are still there, keep running."""
        if not await holds_state(self.redis):
            await self.state_lost("a consumer group is gone")
            return
        log.warning(
            "a consumer group is missing while Redis keeps its state: re-creating the groups"
        )
        for run_id in list(self.runs):
            await self.streams.create_groups(run_id)

    async def state_lost(self, reason: str) -> None:
        """Re-create every run's consumer groups and re-dispatch each shard not settled
        in DuckDB as a new attempt (its streams, queued task and counters are gone)."""
        reason = f"Redis lost its state ({reason})"
        log.error("%s: re-creating consumer groups, re-dispatching unsettled shards", reason)
        for run_id, coordinator in list(self.runs.items()):
            await self.streams.create_groups(run_id)
            if coordinator.cancel_deadline is not None:
                await self.redis.set(cancel_key(run_id), 1, ex=CANCEL_TTL_S)
            if isinstance(coordinator, SessionCoordinator):
                # What the gateway and workers had put in Redis and was not stored yet
                # is gone (logged above); what follows must not be taken for it.
                await restore_batch_counters(self.redis, self.con, run_id)
            for shard in coordinator.shards.values():
                if shard.state in IN_FLIGHT:
                    coordinator.redispatch(shard, reason, self.settings.max_attempts)
        self.dispatcher.unsent.clear()
        await mark_state(self.redis)
        self._state_marked = True

    # ------------------------------------------------------------------ workers

    async def check_workers(self, coordinator: Coordinator) -> None:
        """Re-dispatch the shards of workers that went silent and lost their heartbeat;
        fail the current stage's shards of a region without a live worker for
        ``no_worker_grace_s`` (unless the run waits for workers)."""
        now = time.monotonic()
        # A shard is lost when it went silent and its worker's heartbeat expired. Right
        # after a Redis outage every shard was silent and heartbeats may have expired:
        # give the workers as long again to be heard from.
        after_outage = now - self._reachable_at < self.settings.worker_lost_after_s
        silent = (
            {} if after_outage else coordinator.silent_workers(self.settings.worker_lost_after_s)
        )
        for worker, shards in silent.items():
            region = shards[0].spec.region
            if await self.redis.exists(heartbeat_key(region, worker)):
                continue
            for shard in shards:
                # The owner key of a dead worker would make the re-sent task skip itself.
                await self.redis.delete(owner_key(coordinator.run_id, shard.spec.shard_id))
                coordinator.worker_lost(shard, self.settings.max_attempts)
        index = coordinator.current_stage
        if index >= len(coordinator.stages):
            return
        pending = {
            s.region
            for s in coordinator.stages[index].shards
            if not coordinator.shards[s.shard_id].settled
        }
        for region in pending:
            if coordinator.wait_for_workers or await live_worker_count(self.redis, region) > 0:
                self._no_worker_since.pop(region, None)
                continue
            since = self._no_worker_since.setdefault(region, now)
            if now - since < self.settings.no_worker_grace_s:
                continue
            stranded = [
                coordinator.shards[spec.shard_id]
                for spec in coordinator.stages[index].shards
                if spec.region == region
            ]
            reason = (
                f"no live worker in region {region!r} for "
                f"{self.settings.no_worker_grace_s:g} s ({env_name('control.no_worker_grace_s')})"
            )
            coordinator.settle_many(stranded, ShardState.FAILED, reason)

    # ------------------------------------------------------------------ stalled runs

    async def watchdog(self, coordinator: Coordinator) -> None:
        """A run without progress for ``stall_timeout_s``: re-dispatch each stuck shard
        once, then fail it with the reason (a task still queued is waiting, not stuck)."""
        now = time.monotonic()
        stuck = coordinator.stalled(now, self.settings.stall_timeout_s)
        if not stuck:
            return
        quiet_s = now - coordinator.last_progress_at
        reason = f"no progress for {quiet_s:.0f} s ({env_name('control.stall_timeout_s')})"
        for shard in stuck:
            if shard.state == ShardState.DISPATCHED and await self._queued(shard):
                continue
            if shard.stall_redispatched:
                message = coordinator.missing(shard, f"{reason}, also after a re-dispatch")
                log.error(
                    "run %s: shard %s failed: %s", coordinator.run_id, shard.spec.shard_id, message
                )
                coordinator.fail(shard, message)
            else:
                log.warning(
                    "run %s: shard %s re-dispatched: %s",
                    coordinator.run_id,
                    shard.spec.shard_id,
                    reason,
                )
                shard.stall_redispatched = True
                coordinator.redispatch(shard, reason, self.settings.max_attempts)
        coordinator.last_progress_at = now  # the next verdict after another full timeout

    async def _queued(self, shard: ShardProgress) -> bool:
        spec = shard.spec
        try:
            return await task_queued(
                self.redis, region_queue(spec.region), shard_task_id(spec.run_id, spec.shard_id)
            )
        except UNREACHABLE_ERRORS:
            return False  # Redis away for the whole timeout: nothing is waiting there
