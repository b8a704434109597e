"""The watchdog: a run never stays ``running`` without progress.

An in-process control plane on the session's real Redis and a real DuckDB file, with no
worker for its region: the shard's task waits in the queue (waiting, not stuck) until the
test deletes the queue, as a Redis that lost it would. Then the shard is re-dispatched
once, and failed with the reason and the count of missing requests the next time.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from celery import Celery
from redis.asyncio import Redis

from analytics.store.db import connect
from api.control.plane import ControlPlane
from api.local.redis_server import RedisServer
from scenarios.model import Scenario
from scenarios.settings import ControlSettings
from scenarios.wire.contract import region_queue
from tests.faults.conftest import MISSING, scenario
from workers.runtime.broker import TRANSPORT

pytestmark = pytest.mark.integration

TIMEOUT_S = 0.3


async def _steps_until(plane: ControlPlane, done: object, what: str, limit: int = 50) -> None:
    for _ in range(limit):
        await asyncio.sleep(TIMEOUT_S)
        await plane.step()
        if callable(done) and done():
            return
    raise AssertionError(f"{what} did not happen in {limit} steps")


def test_stuck_shard_is_redispatched_once_then_failed_with_missing_count(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    region = f"wd-{uuid.uuid4().hex[:6]}"
    celery = Celery("watchdog-test", set_as_current=False)
    celery.conf.update(broker_url=redis_server.url, broker_transport=TRANSPORT)

    async def scenario_run() -> tuple[str, str]:
        redis = Redis.from_url(redis_server.url)
        con = connect(tmp_path / "wd.duckdb")
        settings = ControlSettings(stall_timeout_s=TIMEOUT_S, max_attempts=3)
        plane = ControlPlane(redis, con, celery, settings)
        try:
            coordinator = await plane.submit(
                Scenario.model_validate(scenario(region, 10, [1])), wait_for_workers=True
            )
            (shard,) = coordinator.shards.values()
            await plane.step()
            assert shard.state == "dispatched" and shard.dispatches == 1
            # Waiting in its queue: not stuck, however long.
            for _ in range(3):
                await asyncio.sleep(TIMEOUT_S * 2)
                await plane.step()
            assert (shard.state, shard.dispatches) == ("dispatched", 1)
            assert await redis.llen(region_queue(region)) == 1

            await redis.delete(region_queue(region))  # the task is lost
            await _steps_until(plane, lambda: shard.dispatches == 2, "re-dispatch")
            assert shard.stall_redispatched and shard.state == "dispatched"
            assert await redis.llen(region_queue(region)) == 1  # sent again

            await redis.delete(region_queue(region))  # lost again
            await _steps_until(plane, lambda: coordinator.run_id not in plane.runs, "failure")
            return plane.store_state(coordinator.run_id), shard.message or ""
        finally:
            await redis.delete(region_queue(region))
            await redis.aclose()
            con.close()

    state, message = asyncio.run(scenario_run())
    assert state == "failed"
    assert "no progress for" in message and "after a re-dispatch" in message, message
    assert "TOKENBENCH__CONTROL__STALL_TIMEOUT_S" in message
    found = MISSING.search(message)
    assert found is not None and found.groups() == ("10", "10"), message
