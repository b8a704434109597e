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
from api.access.ownership import Kind, Visibility, check_read, readable, record_owner
from api.access.teams import TeamStore
from api.control.cost_plan import CostPlan, plan_from_store
from api.control.dispatch import live_workers
from api.control.plane import ControlPlane, new_run_id
from api.control.queue import Admission, Waiting
from api.control.spend import (
    DryRun,
    OverBudget,
    TeamBudget,
    check_budget,
    record_bound,
    team_budget,
)
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

    async def checked_scenario(self, body: RunCreate, caller: Caller | None = None) -> Scenario:
        """The scenario the request names, with its overrides, validated and checked
        (ScenarioError, egress and dataset refusals as 422 at their fields). With a
        ``caller``, a stored scenario and datasets it may not read are refused exactly
        as unknown ones are (404, 422 at the field)."""
        if (body.scenario_id is None) == (body.scenario is None):
            raise ScenarioError([Problem("", "give exactly one of scenario_id and scenario")])
        if caller is not None and body.scenario_id is not None:
            check_read(self.writer, caller, Kind.SCENARIO, body.scenario_id)
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
        check_scenario_datasets(
            scenario,
            DatasetStore(self.writer),
            None
            if caller is None
            else lambda dataset_id: readable(self.writer, caller, Kind.DATASET, dataset_id),
        )
        return scenario

    async def start(
        self, body: RunCreate, caller: Caller, schedule_id: str | None = None
    ) -> StartedRun:
        """Create the run for ``caller`` (409 if a region has no live worker and the
        request does not wait for one) and record its origin; started now or queued."""
        scenario = await self.checked_scenario(body, caller)
        # Read once: what refuses a region without a worker also splits the stages.
        workers = await live_workers(self.redis, scenario.regions)
        missing = [region for region, count in workers.items() if count == 0]
        if missing and not body.wait_for_workers:
            raise RegionUnavailable(missing)
        plan, budget = await self.cost_plan(scenario, caller, workers)
        check_budget(plan, budget)  # 403 naming the figures and the setting
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
        # Its owner and cost bound, at once (no await since the run was created or
        # queued: nothing reads it unowned; a queued run's bound is held of the budget).
        visibility = None if body.visibility is None else Visibility(body.visibility)
        record_owner(self.writer, Kind.RUN, started.run_id, caller, visibility)
        record_bound(self.writer, started.run_id, caller.team, plan)
        if body.scenario_id is not None:
            record_origin(self.writer, started.run_id, body.scenario_id, schedule_id)
        return started

    async def cost_plan(
        self, scenario: Scenario, caller: Caller, workers: dict[str, int]
    ) -> tuple[CostPlan, TeamBudget]:
        """The run's plan and cost bound (off the event loop: it plans every shard) and
        the caller's team's budget (docs/teams.md)."""
        plan = await asyncio.to_thread(
            plan_from_store,
            self.writer.cursor(),
            scenario,
            workers,
            self.settings.control.max_streams_per_shard,
        )
        policy = TeamStore(self.writer, self.settings.teams).policy(caller.team)
        return plan, team_budget(self.writer, policy)

    async def dry_run(self, body: RunCreate, caller: Caller) -> DryRun:
        """What ``start`` would do, creating nothing: the same validation and admission
        (422, 409 for a region without a worker), then the plan, the team's budget and
        whether the budget admits the run (a refusal is answered, not raised)."""
        scenario = await self.checked_scenario(body, caller)
        workers = await live_workers(self.redis, scenario.regions)
        missing = [region for region, count in workers.items() if count == 0]
        if missing and not body.wait_for_workers:
            raise RegionUnavailable(missing)
        plan, budget = await self.cost_plan(scenario, caller, workers)
        try:
            check_budget(plan, budget)
        except OverBudget as exc:
            return DryRun(plan, budget, str(exc))
        return DryRun(plan, budget, None)


@dataclass(frozen=True)
class StartedRun:
    """A run created by :meth:`RunStarter.start`: running, or queued with why it waits."""

    run_id: str
    state: RunState
    shards: int
    stages: int
    waiting: Waiting | None = None
