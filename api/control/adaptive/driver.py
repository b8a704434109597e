"""The control loop's side of adaptive runs (docs/answers.md): when to decide, when to
check, and what a decision does in Redis.

Deciding the next stages (``api/control/adaptive/decide.py``) and checking the running
stage (``api/control/adaptive/monitor.py``) query DuckDB: each runs in a worker thread
on a cursor of its own, one at a time per run (``AdaptiveState.busy``), so the loop
keeps serving every run meanwhile. A check runs at most every ``MONITOR_INTERVAL_S``,
spaced out when it is slow. An early end that acts sets the stop keys of the provider's
shards of the stage (``scenarios.wire.contract.stop_key``), restored after a restart.
"""

from __future__ import annotations

import asyncio
import logging
import time

import duckdb
from redis.asyncio import Redis

from analytics.store.adaptive_runs import write_outcome
from api.control.adaptive.decide import Decided, decide_next
from api.control.adaptive.monitor import (
    MAX_MONITOR_INTERVAL_S,
    MONITOR_COST_FACTOR,
    MONITOR_INTERVAL_S,
    MonitorInput,
    MonitorResult,
    StopDecision,
    monitor_stage,
    outcome_row,
)
from api.control.dispatch import live_workers
from api.control.planner import Stage
from api.control.run_coordinator import RunCoordinator
from scenarios.model import Scenario
from scenarios.wire.contract import RunState, stop_key

log = logging.getLogger("tokenbench.control")
# A stop key outlives any stage: a late re-dispatch of a stopped shard must still see it.
STOP_TTL_S = 7 * 24 * 3600


class AdaptiveDriver:
    """Decides and checks the stages of adaptive runs for the control loop."""

    def __init__(
        self, redis: Redis, con: duckdb.DuckDBPyConnection, max_streams_per_shard: int
    ) -> None:
        self.redis = redis
        self.con = con
        self.max_streams_per_shard = max_streams_per_shard

    async def decide(self, coordinator: RunCoordinator) -> None:
        """Every stage so far settled: decide (and store) the next ones, in a worker
        thread on a cursor of its own (docs/answers.md). A decision that fails ends the
        run as failed, with the reason in the log, rather than retrying it forever."""
        state = coordinator.adaptive
        if state.busy:
            return
        state.busy = True
        try:
            scenario = coordinator.scenario
            workers = await live_workers(self.redis, scenario.regions)
            decided = await asyncio.to_thread(
                _decide_stages,
                self.con.cursor(),
                coordinator.run_id,
                scenario,
                list(coordinator.stages),
                workers,
                self.max_streams_per_shard,
            )
        except Exception:
            log.exception("run %s: deciding its next stage failed", coordinator.run_id)
            state.decided_all = True
            coordinator.finish(RunState.FAILED)
            return
        finally:
            state.busy = False
        coordinator.add_stages(decided.stages, decided.roles)
        state.decided_all = decided.done
        coordinator.last_progress_at = time.monotonic()
        if decided.stages:
            log.info(
                "run %s: decided stage(s) %s",
                coordinator.run_id,
                ", ".join(str(stage.index) for stage in decided.stages),
            )

    async def check_stage(self, coordinator: RunCoordinator) -> None:
        """At a bounded cadence, check the running stage for early ends: over-saturated,
        interval tight enough, a capacity verdict already certain."""
        state = coordinator.adaptive
        now = time.monotonic()
        if state.busy or now < state.next_check or coordinator.cancel_deadline is not None:
            return
        inputs = coordinator.monitor_input()
        if inputs is None:
            state.next_check = now + MONITOR_INTERVAL_S
            return
        state.busy = True
        try:
            result = await asyncio.to_thread(_monitor_stage, self.con.cursor(), inputs)
        finally:
            state.busy = False
        wait = min(
            max(MONITOR_INTERVAL_S, MONITOR_COST_FACTOR * result.seconds), MAX_MONITOR_INTERVAL_S
        )
        state.next_check = time.monotonic() + wait
        for provider, look in result.looks.items():
            state.looks[(inputs.stage, provider)] = look
        for decision in result.decisions:
            await self._end_early(coordinator, inputs, decision)

    async def restore_stops(self, coordinator: RunCoordinator) -> None:
        """After a restart: the stop keys of stages ended early (Redis may have lost them)."""
        for (stage, provider), row in coordinator.adaptive.ended.items():
            if row.acted and stage < len(coordinator.stages):
                await self._stop_shards(coordinator, stage, provider)

    async def _end_early(
        self, coordinator: RunCoordinator, inputs: MonitorInput, decision: StopDecision
    ) -> None:
        """Record an early end and, when it acts, tell the provider's shards of the stage
        (every region) to stop sending."""
        row = outcome_row(inputs.stage, decision, inputs.providers[decision.provider])
        write_outcome(self.con, coordinator.run_id, row)
        coordinator.adaptive.ended[(inputs.stage, decision.provider)] = row
        log.info(
            "run %s: stage %d, %s %s: %s",
            coordinator.run_id,
            inputs.stage,
            decision.provider,
            decision.outcome if decision.acted else f"{decision.outcome} (marked)",
            decision.reason,
        )
        if decision.acted:
            await self._stop_shards(coordinator, inputs.stage, decision.provider)

    async def _stop_shards(self, coordinator: RunCoordinator, stage: int, provider: str) -> None:
        for spec in coordinator.stages[stage].shards:
            if spec.provider.name == provider and not coordinator.shards[spec.shard_id].settled:
                await self.redis.set(stop_key(spec.run_id, spec.shard_id), 1, ex=STOP_TTL_S)


def _decide_stages(
    cursor: duckdb.DuckDBPyConnection,
    run_id: str,
    scenario: Scenario,
    stages: list[Stage],
    workers: dict[str, int],
    max_streams_per_shard: int,
) -> Decided:
    """Decide a run's next stages on ``cursor`` (closed afterwards), in a worker thread."""
    try:
        return decide_next(cursor, run_id, scenario, stages, workers, max_streams_per_shard)
    finally:
        cursor.close()


def _monitor_stage(cursor: duckdb.DuckDBPyConnection, inputs: MonitorInput) -> MonitorResult:
    """Check a running stage on ``cursor`` (closed afterwards), in a worker thread."""
    try:
        return monitor_stage(cursor, inputs)
    finally:
        cursor.close()
