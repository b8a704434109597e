"""api/control/plane.py and api/control/run_spec.py on real Redis: an in-process control
plane whose region has no worker. A failed run's queued tasks and stored spec leave
Redis when it closes, and a spec Redis lost is stored again before a re-dispatch."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from redis.asyncio import Redis

from analytics.store.db import connect
from api.control.plane import ControlPlane
from api.local.redis_server import RedisServer
from scenarios.model import Scenario
from scenarios.settings import ControlSettings
from scenarios.wire.contract import attempts_key, region_queue, run_spec_key, token_key
from scenarios.wire.shard_payload import message_task_id
from workers.runtime.broker import TRANSPORT

pytestmark = pytest.mark.integration

STEP_S = 0.2


def big_scenario(region: str, providers: int = 4) -> dict[str, Any]:
    return {
        "name": "release",
        "providers": [
            {
                "name": f"p{i}",
                "kind": "openai",
                "base_url": "http://127.0.0.1:9/v1",
                "model": "m",
                "extra_body": {"pad": "b" * 60_000},
            }
            for i in range(providers)
        ],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 4},
                    "output_tokens": {"dist": "fixed", "value": 2},
                }
            ]
        },
        "load": {"concurrency": [1], "requests_per_level": 2},
        "regions": [region],
    }


async def steps_until(plane: ControlPlane, done: Callable[[], bool], what: str) -> None:
    for _ in range(200):
        await plane.step()
        if done():
            return
        await asyncio.sleep(STEP_S)
    raise AssertionError(f"{what} did not happen")


def sender(url: str) -> Celery:
    celery = Celery("release-test", set_as_current=False)
    celery.conf.update(broker_url=url, broker_transport=TRANSPORT)
    return celery


def test_a_failed_runs_queued_tasks_and_spec_leave_redis(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    region = f"rel-{uuid.uuid4().hex[:6]}"

    async def go() -> None:
        redis = Redis.from_url(redis_server.url)
        con = connect(tmp_path / "release.duckdb")
        plane = ControlPlane(
            redis, con, sender(redis_server.url), ControlSettings(no_worker_grace_s=1.0)
        )
        try:
            baseline = int((await redis.info("memory"))["used_memory"])
            coordinator = await plane.submit(Scenario.model_validate(big_scenario(region)))
            run_id = coordinator.run_id
            await steps_until(
                plane, lambda: all(s.dispatches for s in coordinator.shards.values()), "dispatch"
            )
            queued = await redis.lrange(region_queue(region), 0, -1)
            assert len(queued) == 4
            assert all(str(message_task_id(m)).startswith(f"{run_id}/") for m in queued)
            assert max(len(m) for m in queued) < 8 * 1024  # 60 KB providers by reference
            assert await redis.hlen(run_spec_key(run_id)) == 5  # 4 providers, 1 workload
            first = next(iter(coordinator.shards))
            await redis.incr(attempts_key(run_id, first))
            await redis.set(token_key(run_id, first), "t", ex=3600)  # a straggler's claim

            await steps_until(plane, lambda: run_id not in plane.runs, "the run closing")
            assert plane.store_state(run_id) == "failed"
            assert await redis.llen(region_queue(region)) == 0
            assert not await redis.exists(run_spec_key(run_id))
            assert 0 < await redis.ttl(attempts_key(run_id, first)) <= 24 * 3600
            assert not await redis.exists(token_key(run_id, first))  # it can publish no more
            after = int((await redis.info("memory"))["used_memory"])
            assert after < baseline + 2**20
        finally:
            await redis.delete(region_queue(region))
            await redis.aclose()
            con.close()

    asyncio.run(go())


def test_a_spec_redis_lost_is_stored_again_before_a_redispatch(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    region = f"rel-{uuid.uuid4().hex[:6]}"

    async def go() -> None:
        redis = Redis.from_url(redis_server.url)
        con = connect(tmp_path / "lost.duckdb")
        settings = ControlSettings(stall_timeout_s=0.5, max_attempts=3)
        plane = ControlPlane(redis, con, sender(redis_server.url), settings)
        try:
            coordinator = await plane.submit(
                Scenario.model_validate(big_scenario(region, providers=1)), wait_for_workers=True
            )
            (shard,) = coordinator.shards.values()
            await steps_until(plane, lambda: shard.dispatches == 1, "dispatch")
            key = run_spec_key(coordinator.run_id)
            assert await redis.hlen(key) == 2
            assert await redis.ttl(key) > 0
            # Redis lost the task and the stored spec: the watchdog sends the shard again,
            # its provider and workload stored first.
            await redis.delete(region_queue(region), key)
            await steps_until(plane, lambda: shard.dispatches == 2, "re-dispatch")
            assert await redis.hlen(key) == 2
            assert await redis.llen(region_queue(region)) == 1
            await plane.cancel(coordinator.run_id, drain_s=0)
            await steps_until(plane, lambda: coordinator.run_id not in plane.runs, "cancel")
            assert await redis.llen(region_queue(region)) == 0
            assert not await redis.exists(key)
        finally:
            await redis.delete(region_queue(region))
            await redis.aclose()
            con.close()

    asyncio.run(go())
