"""api/control/recovery.py on real Redis (a database of its own, so that flushing it
touches no other test): a Redis that came back without the control plane's state gets
the run's consumer groups back, and the run's shard is sent again as a new attempt."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from celery import Celery
from redis.asyncio import Redis

from analytics.store.db import connect
from api.control.plane import ControlPlane
from api.control.recovery import Recovery
from api.local.redis_server import RedisServer
from scenarios.gateway_config import GatewayConfig
from scenarios.model import Scenario
from scenarios.settings import ControlSettings
from scenarios.wire.contract import (
    captures_stream,
    events_stream,
    records_stream,
    region_queue,
)
from tests.faults.conftest import scenario
from tests.support.teams import gateway_config
from workers.runtime.broker import TRANSPORT

pytestmark = pytest.mark.integration

OWN_DB = 10


@pytest.fixture
def url(redis_server: RedisServer) -> Iterator[str]:
    """An empty Redis database of this test's own."""
    own = f"redis://127.0.0.1:{redis_server.port}/{OWN_DB}"
    flush = redis.Redis.from_url(own)
    flush.flushdb()
    yield own
    flush.flushdb()
    flush.close()


def test_a_redis_that_lost_its_state_gets_groups_back_and_the_shard_again(
    tmp_path: Path, url: str
) -> None:
    region = f"rec-{uuid.uuid4().hex[:6]}"
    celery = Celery("recovery-test", set_as_current=False)
    celery.conf.update(broker_url=url, broker_transport=TRANSPORT)

    async def go() -> None:
        client = Redis.from_url(url)
        con = connect(tmp_path / "recovery.duckdb")
        plane = ControlPlane(client, con, celery, ControlSettings(max_attempts=3))
        recovery: Recovery = plane.recovery
        try:
            coordinator = await plane.submit(
                Scenario.model_validate(scenario(region, 4, [1])), wait_for_workers=True
            )
            (shard,) = coordinator.shards.values()
            await plane.step()  # dispatched; the state marker written
            assert shard.dispatches == 1 and await client.llen(region_queue(region)) == 1
            assert not await recovery.check_state()  # the marker is there

            await client.flushdb()  # Redis came back empty
            assert await recovery.check_state()  # lost, and rebuilt
            run_id = coordinator.run_id
            for stream in (events_stream(run_id), records_stream(run_id)):
                assert [g["name"] for g in await client.xinfo_groups(stream)] == [b"control"]
            assert shard.state == "planned"  # a new attempt, sent by the next step
            await plane.step()
            assert shard.dispatches == 2 and await client.llen(region_queue(region)) == 1
            await plane.cancel(run_id, drain_s=0)
            for _ in range(50):
                if not plane.runs:
                    break
                await plane.step()
            assert plane.store_state(run_id) == "cancelled"
        finally:
            await client.aclose()
            con.close()

    asyncio.run(go())


def test_a_group_gone_while_redis_keeps_its_state_is_made_again_and_nothing_resent(
    tmp_path: Path, url: str
) -> None:
    region = f"rec-{uuid.uuid4().hex[:6]}"
    celery = Celery("recovery-test", set_as_current=False)
    celery.conf.update(broker_url=url, broker_transport=TRANSPORT)

    async def go() -> None:
        client = Redis.from_url(url)
        con = connect(tmp_path / "recovery.duckdb")
        plane = ControlPlane(client, con, celery, ControlSettings(max_attempts=3))
        try:
            coordinator = await plane.submit(
                Scenario.model_validate(scenario(region, 4, [1])), wait_for_workers=True
            )
            (shard,) = coordinator.shards.values()
            await plane.step()  # dispatched; the state marker written
            assert shard.dispatches == 1
            run_id = coordinator.run_id
            await client.xgroup_destroy(events_stream(run_id), "control")
            await plane.step()  # the read meets NOGROUP
            assert [g["name"] for g in await client.xinfo_groups(events_stream(run_id))] == [
                b"control"
            ]
            await plane.step()
            assert shard.state == "dispatched" and shard.dispatches == 1
            assert await client.llen(region_queue(region)) == 1  # the one task, not two
        finally:
            await client.aclose()
            con.close()

    asyncio.run(go())


def test_a_session_is_read_only_once_its_groups_exist(tmp_path: Path, url: str) -> None:
    """The loop reads the streams of every run it holds: a session put there before its
    groups exist would be read without them (NOGROUP)."""
    celery = Celery("recovery-test", set_as_current=False)
    celery.conf.update(broker_url=url, broker_transport=TRANSPORT)

    async def go() -> None:
        client = Redis.from_url(url)
        con = connect(tmp_path / "recovery.duckdb")
        plane = ControlPlane(client, con, celery, ControlSettings())
        await plane.start()  # the shadow tables, the state marker
        held_while_created: list[bool] = []
        create = plane.streams.create_groups

        async def spy(run_id: str, session: bool | None = None) -> None:
            held_while_created.append(run_id in plane.runs)
            await create(run_id, session)

        plane.streams.create_groups = spy  # type: ignore[method-assign]
        try:
            session = await plane.open_session(GatewayConfig.model_validate(gateway_config("g")))
            assert held_while_created == [False]
            groups = await client.xinfo_groups(captures_stream(session.run_id))
            assert [g["name"] for g in groups] == [b"control"]
        finally:
            await client.aclose()
            con.close()

    asyncio.run(go())
