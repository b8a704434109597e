"""An unexpected error in one step of the control loop does not end the loop.

An in-process control plane serving forever (as ``tokenbench serve`` does) on the
session's real Redis and a real DuckDB file, with the session's real 'eu' worker. One
step raises an error no code path expects (injected into the dispatch of the first run):
the loop logs it with the run's id, counts it (``step_errors``, on /metrics), backs off
and goes on. That run still completes, and so does a run submitted after it.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from celery import Celery
from redis.asyncio import Redis

from analytics.store.db import connect
from api.control.coordinator import Coordinator
from api.control.plane import ControlPlane
from api.local.redis_server import RedisServer
from scenarios.model import Scenario
from scenarios.settings import ControlSettings
from tests.conftest import Proc
from tests.faults.conftest import scenario
from workers.runtime.broker import TRANSPORT

pytestmark = pytest.mark.integration

POLL_S = 0.1
MAX_POLLS = 1800  # generous: a loaded machine


class InjectedError(Exception):
    """A bug in a step, as the control loop would meet one."""


async def _until_closed(plane: ControlPlane, run_id: str) -> str:
    for _ in range(MAX_POLLS):
        if run_id not in plane.runs:
            return plane.store_state(run_id)
        await asyncio.sleep(POLL_S)
    raise AssertionError(f"run {run_id} did not close")


def test_a_step_that_raises_is_logged_counted_and_later_runs_complete(
    tmp_path: Path,
    redis_server: RedisServer,
    eu_worker: Proc,
    caplog: pytest.LogCaptureFixture,
) -> None:
    celery = Celery("step-errors-test", set_as_current=False)
    celery.conf.update(broker_url=redis_server.url, broker_transport=TRANSPORT)
    caplog.set_level(logging.ERROR, logger="tokenbench.control")

    async def go() -> tuple[list[str], str]:
        redis = Redis.from_url(redis_server.url)
        con = connect(tmp_path / "step-errors.duckdb")
        plane = ControlPlane(redis, con, celery, ControlSettings())
        dispatch = plane.dispatcher.dispatch
        broken: list[str] = []

        async def dispatch_once_broken(coordinator: Coordinator) -> None:
            if not broken:
                broken.append(coordinator.run_id)
                raise InjectedError("a bug in one step")
            await dispatch(coordinator)

        plane.dispatcher.dispatch = dispatch_once_broken  # type: ignore[method-assign]
        stop = asyncio.Event()
        loop = asyncio.create_task(plane.serve_forever(stop))
        try:
            first = await plane.submit(Scenario.model_validate(scenario("eu", 6, [2])))
            states = [await _until_closed(plane, first.run_id)]
            assert broken == [first.run_id] and not loop.done()
            later = await plane.submit(Scenario.model_validate(scenario("eu", 6, [2])))
            states.append(await _until_closed(plane, later.run_id))
            assert plane.step_errors == 1
            return states, first.run_id
        finally:
            stop.set()
            await asyncio.wait_for(loop, 60)
            await redis.aclose()
            con.close()

    states, first_id = asyncio.run(go())
    assert states == ["finished", "finished"]
    (record,) = [r for r in caplog.records if "unexpected error in a step" in r.getMessage()]
    assert f"on run {first_id}" in record.getMessage()
    assert record.exc_info is not None and isinstance(record.exc_info[1], InjectedError)
