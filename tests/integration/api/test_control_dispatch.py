"""api/control/dispatch.py on real Redis: a region's live worker processes are counted
from their heartbeats, and a submission splits its stages over the counts it was given
(read once, by whoever refuses a region without a worker) rather than reading them again."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from redis.asyncio import Redis

from analytics.store.db import connect
from api.control.dispatch import live_workers
from api.control.plane import ControlPlane
from api.local.redis_server import RedisServer
from scenarios.model import Scenario
from scenarios.settings import ControlSettings
from scenarios.wire.contract import heartbeat_key, region_queue
from workers.runtime.broker import TRANSPORT

pytestmark = pytest.mark.integration


def wide_scenario(region: str) -> dict[str, Any]:
    """One provider nobody serves (the shards only wait in their queue), 256 streams."""
    return {
        "name": "dispatch",
        "providers": [
            {"name": "p", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
        ],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 4},
                    "output_tokens": {"dist": "fixed", "value": 2},
                }
            ]
        },
        "load": {"concurrency": [256], "requests_per_level": 1000},
        "regions": [region],
    }


def test_a_submission_splits_over_the_live_workers_it_was_given_or_reads_them(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    region = f"dsp-{uuid.uuid4().hex[:6]}"
    nowhere = f"none-{uuid.uuid4().hex[:6]}"
    celery = Celery("dispatch-test", set_as_current=False)
    celery.conf.update(broker_url=redis_server.url, broker_transport=TRANSPORT)

    async def go() -> None:
        redis = Redis.from_url(redis_server.url)
        con = connect(tmp_path / "dispatch.duckdb")
        plane = ControlPlane(redis, con, celery, ControlSettings())
        beats = [heartbeat_key(region, f"w{n}") for n in range(3)]
        try:
            for key in beats:
                await redis.set(key, 1, ex=120)
            assert await live_workers(redis, [region, nowhere]) == {region: 3, nowhere: 0}
            scenario = Scenario.model_validate(wide_scenario(region))
            given = await plane.submit(scenario, wait_for_workers=True, workers={region: 4})
            read = await plane.submit(scenario, wait_for_workers=True)
            assert len(given.stages[0].shards) == 4  # as given: not read again
            assert len(read.stages[0].shards) == 3  # read: three heartbeats
            for coordinator in (given, read):
                await plane.cancel(coordinator.run_id, drain_s=0)
            for _ in range(50):
                if not plane.runs:
                    break
                await plane.step()
            assert not plane.runs
            assert plane.store_state(given.run_id) == plane.store_state(read.run_id) == "cancelled"
        finally:
            await redis.delete(*beats, region_queue(region))
            await redis.aclose()
            con.close()

    asyncio.run(go())
