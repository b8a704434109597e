"""Starting a run from a request: the one path of ``POST /v1/runs`` and of a schedule's fire.

The scenario (stored, or inline), with the per-run overrides applied, is validated, its
URLs checked by the egress policy and its datasets looked up, exactly as the route
always did; a region without a live worker is a 409 unless the request waits for
workers. A run whose endpoints are in use by another run, or whose team runs as many
runs as its quota allows, is queued instead of started (docs/teams.md). A run of a
stored scenario records where it came from (``run_origins``: the
scenario, and the schedule that fired it), which is how trends find a schedule's runs.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import duckdb
from redis.asyncio import Redis

from analytics.datasets.uploads import DatasetStore
from api.access.caller import Caller
from api.control.dispatch import live_workers
from api.control.plane import ControlPlane, new_run_id
from api.control.queue import Admission, Waiting
from api.rest.errors import RegionUnavailable
from api.rest.offload import HeavyWork
from api.rest.scenario_store import ScenarioStore
from api.rest.validation import (
    check_scenario_datasets,
    check_scenario_egress,
    check_scenario_upstreams,
    scenario_with_overrides,
)
from api.schedules.store import record_origin
from api.schemas import RunCreate
from scenarios.loader import Problem, ScenarioError
from scenarios.model import Scenario
from scenarios.settings import Settings
from scenarios.wire.contract import RunState


@dataclass(frozen=True)
class RunStarter:
    """What starting a run needs: the loop, Redis, the stored scenarios, the settings,
    the writer connection (used on the event loop only) and the shared limiter of heavy
    work (api/rest/offload.py; without one, validation runs in a thread of its own)."""

    plane: ControlPlane
    redis: Redis
    scenarios: ScenarioStore
    settings: Settings
    writer: duckdb.DuckDBPyConnection
    heavy: HeavyWork | None = None

    async def checked_scenario(self, body: RunCreate) -> Scenario:
        """The scenario the request names, with its overrides, validated and checked
        (ScenarioError, egress and dataset refusals as 422 at their fields)."""
        if (body.scenario_id is None) == (body.scenario is None):
            raise ScenarioError([Problem("", "give exactly one of scenario_id and scenario")])
        stored = self.scenarios.get(body.scenario_id).scenario if body.scenario_id else None
        data = stored if stored is not None else body.scenario
        # Off the event loop: validating a large scenario takes a while.
        if self.heavy is None:
            scenario = await asyncio.to_thread(
                scenario_with_overrides, dict(data or {}), body.overrides
            )
        else:
            scenario = await self.heavy.run(
                "a scenario's validation", scenario_with_overrides, dict(data or {}), body.overrides
            )
        check_scenario_upstreams(scenario)
        check_scenario_egress(scenario, self.settings.egress)
        check_scenario_datasets(scenario, DatasetStore(self.writer))
        return scenario

    async def start(
        self, body: RunCreate, caller: Caller, schedule_id: str | None = None
    ) -> StartedRun:
        """Create the run for ``caller`` (409 if a region has no live worker and the
        request does not wait for one), started now or queued, and record its origin."""
        scenario = await self.checked_scenario(body)
        # Read once: what refuses a region without a worker also splits the stages.
        workers = await live_workers(self.redis, scenario.regions)
        missing = [region for region, count in workers.items() if count == 0]
        if missing and not body.wait_for_workers:
            raise RegionUnavailable(missing)
        # --- Endpoint leases and team quotas (docs/teams.md; api/control/queue.py): start
        # now, queue (targets busy, or the team at max_concurrent_runs), or refuse (429,
        # the team at max_queued_runs). Admission and enqueueing are synchronous: no other
        # request can take the same targets in between.
        queue = self.plane.queue
        run_id = new_run_id()
        admission = queue.admit(run_id, scenario, caller) if queue else Admission(queued=False)
        if queue is not None and admission.queued:
            queue.enqueue(run_id, scenario, caller, body.wait_for_workers)
            started = StartedRun(run_id, RunState.QUEUED, 0, 0, admission.waiting)
        else:
            try:
                coordinator = await self.plane.submit(
                    scenario, run_id=run_id, wait_for_workers=body.wait_for_workers, workers=workers
                )
            finally:
                if queue is not None:
                    queue.started(run_id, caller.team)
            started = StartedRun(
                run_id, coordinator.state, len(coordinator.shards), len(coordinator.stages)
            )
        # --- end of leases and quotas
        if body.scenario_id is not None:
            record_origin(self.writer, started.run_id, body.scenario_id, schedule_id)
        return started


@dataclass(frozen=True)
class StartedRun:
    """A run created by :meth:`RunStarter.start`: running, or queued with why it waits."""

    run_id: str
    state: RunState
    shards: int
    stages: int
    waiting: Waiting | None = None
