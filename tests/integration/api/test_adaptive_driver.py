"""api/control/adaptive/driver.py on real Redis: after a restart, the stop keys of the
stages ended early are set again (Redis may have lost them), only for the early ends
that acted, and only on the shards of the provider that ended."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from redis.asyncio import Redis

from analytics.store.adaptive_runs import OutcomeRow
from analytics.store.db import connect
from analytics.store.runs import RunStore
from api.control.adaptive.driver import STOP_TTL_S, AdaptiveDriver
from api.control.run_coordinator import RunCoordinator
from api.local.redis_server import RedisServer
from scenarios.wire.contract import stop_key
from tests.support.adaptive import scenario

pytestmark = pytest.mark.integration


def test_stops_of_early_ends_that_acted_are_set_again(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    spec = scenario(
        {"sweep": {"points": 3, "throughput_concurrency": 4}, "requests_per_level": 40}, 2
    )
    con = connect(tmp_path / "driver.duckdb")
    run_id = f"drv-{uuid.uuid4().hex[:6]}"
    coordinator = RunCoordinator.create(run_id, spec, RunStore(con), 512)
    ended = {"p0": True, "p1": False}  # p1's end was only marked
    for provider, acted in ended.items():
        row = OutcomeRow(1, provider, "saturated", acted, "queue grows", {}, 40, 12, 3.0)
        coordinator.adaptive.ended[(1, provider)] = row

    async def go() -> dict[str, int]:
        redis = Redis.from_url(redis_server.url)
        try:
            await AdaptiveDriver(redis, con, 512).restore_stops(coordinator)
            return {
                spec.shard_id: await redis.ttl(stop_key(run_id, spec.shard_id))
                for stage in coordinator.stages
                for spec in stage.shards
            }
        finally:
            await redis.aclose()

    ttls = asyncio.run(go())
    con.close()
    stopped = {shard for shard, ttl in ttls.items() if ttl > 0}
    assert stopped == {s.shard_id for s in coordinator.stages[1].shards if s.provider.name == "p0"}
    assert all(0 < ttls[shard] <= STOP_TTL_S for shard in stopped)
