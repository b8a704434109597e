"""A planned run: stages of shards, dispatched in order (docs/load.md, docs/answers.md).

Its plan is stored when it is created and read back on a control-plane restart
(:meth:`RunCoordinator.resume`), so a restarted control plane rebuilds the same state
from the database; an adaptive load appends the stages it decides to that plan.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from analytics.datasets.uploads import DatasetStore, UnknownDatasetError
from analytics.decide.saturation import ShardSamples
from analytics.store.adaptive_runs import RoleRow, outcome_rows, role_rows, write_roles
from analytics.store.runs import RunStore
from api.control.adaptive.monitor import MonitorInput, ProviderLive
from api.control.adaptive.state import AdaptiveState, initial_roles
from api.control.coordinator import Coordinator, ShardProgress
from api.control.planner import Stage, plan_run, planned_shards, stored_stages
from api.control.run_spec import check_queued_bytes
from scenarios.loader import Problem, ScenarioError
from scenarios.model import Scenario
from scenarios.stages import scheduled_rate
from scenarios.wire.contract import SETTLED, RunState, ShardState


class RunCoordinator(Coordinator):
    """A planned run: stages of shards, dispatched in order. Its plan is stored when it
    is created and read back on a restart, so a change of settings (e.g.
    ``max_streams_per_shard``) never re-splits a run already under way. An adaptive load
    (docs/answers.md) appends the stages it decides to that plan as it goes."""

    def __init__(
        self,
        run_id: str,
        scenario: Scenario,
        store: RunStore,
        stages: list[Stage],
        wait_for_workers: bool = False,
        roles: list[RoleRow] | None = None,
    ) -> None:
        super().__init__(run_id, scenario, store, stages, wait_for_workers)
        self.adaptive = AdaptiveState(deciding=scenario.load.adaptive)
        self.roles: dict[tuple[int, str], str] = {}
        self.add_roles(roles or [])

    @property
    def awaiting_decision(self) -> bool:
        """True when every stage so far settled and the load may decide more."""
        return (
            self.state == RunState.RUNNING
            and self.adaptive.deciding
            and not self.adaptive.decided_all
            and self.cancel_deadline is None
            and all(s.settled for s in self.shards.values())
        )

    @property
    def complete(self) -> bool:
        """Every shard settled and no stage left to decide (or the run ended otherwise)."""
        return super().complete and not self.awaiting_decision

    def add_roles(self, roles: list[RoleRow]) -> None:
        """Remember the roles of decided stages (progress labels, the checks)."""
        for role in roles:
            self.roles[(role.stage, role.provider)] = role.role

    def add_stages(self, stages: list[Stage], roles: list[RoleRow]) -> None:
        """Append decided stages (already stored) to the plan."""
        for stage in stages:
            self.stages.append(stage)
            for spec in stage.shards:
                self.shards[spec.shard_id] = ShardProgress(spec)
        self.add_roles(roles)

    def monitor_input(self) -> MonitorInput | None:
        """What a check of the running stage reads, or None when nothing in it is to be
        checked: no stop rule applies, or every provider ended or settled."""
        index = self.current_stage
        load = self.scenario.load
        if self.state != RunState.RUNNING or index >= len(self.stages):
            return None
        stage = self.stages[index]
        open_loop = any(scheduled_rate(s) is not None for s in stage.shards)
        checked = (
            load.stop_when is not None
            or load.find_capacity is not None
            or (open_loop and load.saturation_action != "off")
        )
        if not checked:
            return None
        providers: dict[str, ProviderLive] = {}
        attempts: list[tuple[str, int]] = []
        by_provider: dict[str, list[ShardProgress]] = {}
        for spec in stage.shards:
            by_provider.setdefault(spec.provider.name, []).append(self.shards[spec.shard_id])
        for name, shards in by_provider.items():
            if (index, name) in self.adaptive.ended or all(s.settled for s in shards):
                continue
            clocks = [s.elapsed_s for s in shards if s.elapsed_s is not None]
            if not clocks:
                continue  # no progress yet: nothing to judge
            attempts += [(s.spec.shard_id, s.attempt) for s in shards if s.attempt is not None]
            regions: dict[str, list[ShardSamples]] = {}
            for shard in shards:
                regions.setdefault(shard.spec.region, []).append(ShardSamples(list(shard.samples)))
            planned = [s.planned for s in shards]
            rate = stage.rate_of(name)
            cap = stage.level_of(name) if rate is not None else None
            providers[name] = ProviderLive(
                role=self.roles.get((index, name)),
                offered_rps=rate,
                cap=cap or None,
                elapsed_s=max(clocks),
                planned=None if None in planned else sum(p or 0 for p in planned),
                done=sum(s.done for s in shards),
                regions=regions,
            )
        if not providers:
            return None
        looks = {name: self.adaptive.looks.get((index, name), 0) for name in providers}
        return MonitorInput(self.run_id, index, self.scenario, attempts, providers, looks)

    @classmethod
    def create(
        cls,
        run_id: str,
        scenario: Scenario,
        store: RunStore,
        max_streams_per_shard: int,
        workers: Mapping[str, int] | None = None,
        max_queued_bytes: int | None = None,
    ) -> RunCoordinator:
        """A new run, recorded in the database with its planned shards; its stages are
        split over ``workers``, the live worker processes of each region. A run whose
        messages would take more than ``max_queued_bytes`` of Redis is refused
        (ScenarioError) before anything is stored."""
        stages = plan_run(
            run_id,
            scenario,
            max_streams_per_shard,
            replay_times=replay_times(scenario, store),
            workers=workers,
        )
        if max_queued_bytes is not None:
            check_queued_bytes((s for stage in stages for s in stage.shards), max_queued_bytes)
        roles = initial_roles(scenario) if scenario.load.adaptive else []
        store.create_run(
            run_id,
            scenario,
            planned_shards(stages),
            also=lambda con: write_roles(con, run_id, roles),
        )
        return cls(run_id, scenario, store, stages, roles=roles)

    @classmethod
    def resume(cls, run_id: str, store: RunStore, max_streams_per_shard: int) -> RunCoordinator:
        """Rebuild a running run's state from the database (after a control-plane restart).

        ``max_streams_per_shard`` is used only for a run stored before plans were."""
        scenario = Scenario.model_validate_json(store.scenario_json(run_id))
        coordinator = cls(
            run_id,
            scenario,
            store,
            run_plan(store, run_id, scenario, max_streams_per_shard),
            roles=role_rows(store.con, run_id),
        )
        for outcome in outcome_rows(store.con, run_id):
            coordinator.adaptive.ended[(outcome.stage, outcome.provider)] = outcome
        for row in store.shard_states(run_id):
            shard = coordinator.shards.get(row.shard_id)
            if shard is None:
                raise RuntimeError(
                    f"run {run_id}: stored shard {row.shard_id} is not in its plan "
                    "(a run stored before plans were, re-planned after "
                    "max_streams_per_shard changed?)"
                )
            shard.state, shard.message = ShardState(row.state), row.message
            shard.attempt, shard.worker = row.attempt, row.worker
            shard.dispatches = row.dispatches
            shard.finished_attempt, shard.expected_batches = row.finished_attempt, row.batches
            shard.ingested = dict(row.ingested)
            shard.done = row.records
            if shard.state == ShardState.DISPATCHED:
                shard.dispatched_at = time.monotonic()
        coordinator.records_ingested = store.records_count(run_id)
        coordinator.settle()
        return coordinator


def run_plan(
    store: RunStore, run_id: str, scenario: Scenario, max_streams_per_shard: int
) -> list[Stage]:
    """The run's stages as stored when it was created; a run stored before plans were
    (schema v7) is re-planned with the settings in force, as it always was."""
    stored = store.stored_plan(run_id)
    if stored is not None:
        return stored_stages([(s.stage_concurrency, s.spec) for s in stored])
    return plan_run(
        run_id, scenario, max_streams_per_shard, replay_times=replay_times(scenario, store)
    )


def replay_times(scenario: Scenario, store: RunStore) -> list[float]:
    """The timestamps a replay is planned from, read from the dataset store (no file is
    ever read); ScenarioError at the field when the dataset is not there (any more)."""
    replay = scenario.workload.replay
    if replay is None:
        return []
    if replay.dataset is None:
        problem = Problem(
            "workload.replay.path",
            "a run replays an uploaded dataset, never a path: upload the file with "
            "POST /v1/datasets (`tokenbench run` and `submit` do it for a local file)",
        )
        raise ScenarioError([problem])
    try:
        return DatasetStore(store.con).replay_times(replay.dataset)
    except UnknownDatasetError:
        message = f"dataset {replay.dataset} is not stored (any more): upload the file again"
        raise ScenarioError([Problem("workload.replay.dataset", message)]) from None
    except ValueError as exc:
        raise ScenarioError([Problem("workload.replay.dataset", str(exc))]) from None


def fail_unresumable(store: RunStore, run_id: str, reason: str) -> None:
    """End a run that cannot be resumed after a restart (e.g. its dataset is gone) as
    failed, every unsettled shard carrying ``reason``; the other runs resume."""
    for row in store.shard_states(run_id):
        if row.state not in SETTLED:
            store.shard_done(run_id, row.shard_id, ShardState.FAILED, row.attempt, reason)
    store.finish_run(run_id, RunState.FAILED)
