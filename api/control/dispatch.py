"""Sending shards to the workers: their Celery tasks, and the datasets they read.

A shard is marked dispatched in DuckDB first (by its coordinator), and its Celery task
id is fixed, so a re-send is harmless: the worker skips a shard that is done or owned by
a live worker. The message refers to the run's stored provider and workload
(``api/control/run_spec.py``): a large ``extra_body`` is not copied into every message.
A task that could not be sent (Redis unreachable) is kept in :attr:`Dispatcher.unsent`
and sent again when Redis answers (``api/control/recovery.py``).

How many worker processes a region has alive is read here too (their heartbeats): a
stage is split over them when it is planned (docs/scaling.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import duckdb
from celery import Celery
from redis.asyncio import Redis

from analytics.datasets.uploads import DatasetStore, UnknownDatasetError, workload_datasets
from api.control.coordinator import Coordinator, ShardProgress
from api.control.redis_faults import prepare_redispatch
from api.control.run_spec import RunSpecParts
from scenarios.wire.contract import (
    DATASET_TTL_S,
    RUN_SHARD,
    dataset_key,
    heartbeat_pattern,
    region_queue,
    shard_task_id,
)


async def live_worker_count(redis: Redis, region: str) -> int:
    """Number of workers of ``region`` with a current heartbeat."""
    return len([k async for k in redis.scan_iter(match=heartbeat_pattern(region), count=100)])


async def live_workers(redis: Redis, regions: Iterable[str]) -> dict[str, int]:
    """Live worker processes of each of ``regions``, read once (what a stage is split
    over, and what tells a region without a worker)."""
    return {region: await live_worker_count(redis, region) for region in regions}


class Dispatcher:
    """Sends the tasks of dispatched shards, and the datasets they read."""

    def __init__(self, redis: Redis, con: duckdb.DuckDBPyConnection, celery: Celery) -> None:
        self.redis = redis
        self.con = con
        self.celery = celery
        self.spec_parts = RunSpecParts()  # providers/workloads the shard messages refer to
        # Shards whose send failed (Redis unreachable), by (run id, shard id): resent.
        self.unsent: dict[tuple[str, str], ShardProgress] = {}

    async def dispatch(self, coordinator: Coordinator) -> None:
        """Send the run's shards that are due (its current stage's planned ones)."""
        shards = coordinator.to_dispatch()
        if shards and not await self.publish_datasets(coordinator):
            return
        for shard in shards:
            coordinator.mark_dispatched(shard)
            await self.send_shard(shard)

    async def send_shard(self, shard: ShardProgress) -> None:
        """Send a dispatched shard's task; kept to be sent again if Redis is unreachable."""
        spec = shard.spec
        self.unsent[(spec.run_id, spec.shard_id)] = shard
        if shard.dispatches > 1:
            await prepare_redispatch(self.redis, spec.run_id, spec.shard_id, shard.highest_attempt)
        await self._send(shard)
        del self.unsent[(spec.run_id, spec.shard_id)]

    async def publish_datasets(self, coordinator: Coordinator) -> bool:
        """Make sure the datasets the run's shards read are in Redis (their TTL refreshed,
        or set again if Redis lost them); False, with the run's open shards failed, when
        a dataset is no longer stored."""
        for _, dataset_id in workload_datasets(coordinator.scenario.workload):
            key = dataset_key(dataset_id)
            if await self.redis.expire(key, DATASET_TTL_S):
                continue
            try:
                # In a thread, on a cursor of its own: a dataset may be 64 MiB.
                content = await asyncio.to_thread(_dataset_content, self.con.cursor(), dataset_id)
            except UnknownDatasetError:
                message = f"dataset {dataset_id} is not stored (any more): upload it again"
                for shard in coordinator.shards.values():
                    if not shard.settled:
                        coordinator.fail(shard, message)
                return False
            await self.redis.set(key, content, ex=DATASET_TTL_S)
        return True

    async def _send(self, shard: ShardProgress) -> None:
        spec = shard.spec
        # The message refers to the run's stored provider and workload (set again here
        # if Redis lost them): a large extra_body is not copied into every message.
        message = await self.spec_parts.message(self.redis, spec)
        await asyncio.to_thread(
            self.celery.send_task,
            RUN_SHARD,
            args=[message.model_dump(mode="json")],
            queue=region_queue(spec.region),
            task_id=shard_task_id(spec.run_id, spec.shard_id),
        )


def _dataset_content(cursor: duckdb.DuckDBPyConnection, dataset_id: str) -> bytes:
    try:
        return DatasetStore(cursor).content(dataset_id)
    finally:
        cursor.close()
