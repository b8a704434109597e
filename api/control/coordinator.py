"""The lifecycle of one run: which shards to dispatch, and what each event means.

A run is a sequence of stages; a stage is settled when each of its shards is settled:
finished with every announced batch ingested, or failed. The coordinator is a state
machine fed by the control plane; every transition is written to DuckDB before the
stream entry that caused it is acknowledged, so a restarted control plane rebuilds the
same state from the database (:meth:`RunCoordinator.resume`, from the plan stored when
the run was created).

The control plane drives every run through :class:`Coordinator`. A planned run is a
:class:`RunCoordinator`; a shadow-traffic session (:class:`SessionCoordinator`,
docs/shadow.md) is a run of another shape: no stages to dispatch, a fixed set of record
streams (its shards), and no end until it is stopped.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from analytics.datasets.uploads import DatasetStore, UnknownDatasetError
from analytics.decide.saturation import ShardSamples
from analytics.shadow.capture import SessionShard, activate_session, close_session, register_session
from analytics.store.adaptive_runs import RoleRow, outcome_rows, role_rows, write_roles
from analytics.store.runs import PlannedShard, RunStore
from api.control.adaptive import (
    AdaptiveState,
    MonitorInput,
    ProviderLive,
    initial_roles,
)
from api.control.planner import Stage, plan_run, stored_stages
from api.control.run_spec import check_queued_bytes
from scenarios.gateway_config import GatewayConfig
from scenarios.loader import Problem, ScenarioError
from scenarios.model import Scenario
from scenarios.settings import env_name
from scenarios.wire import (
    IN_FLIGHT,
    PRIMARY_SHARD,
    SETTLED,
    EventType,
    RunState,
    ShardSpec,
    ShardState,
    shadow_shard_id,
)

# Fields of `shard_finished` that describe the lifecycle; the rest is the client's
# self-measurement (docs/load.md), stored as the attempt's health.
_LIFECYCLE_FIELDS = {"type", "shard_id", "attempt", "at", "records", "batches", "errors"}
# Progress reports a shard keeps for the saturation check (one a second: ~10 minutes
# whole, then thinned).
MAX_SAMPLES = 600


@dataclass
class ShardProgress:
    """What the control plane knows of one shard."""

    spec: ShardSpec
    state: ShardState = ShardState.PLANNED
    attempt: int | None = None  # latest attempt started
    worker: str | None = None  # worker running that attempt
    dispatches: int = 0
    dispatched_at: float | None = None
    finished_attempt: int | None = None
    expected_batches: int | None = None
    ingested: dict[int, int] = field(default_factory=dict)  # attempt -> batches stored
    done: int = 0
    errors: int = 0
    ttft_p50_ms: float | None = None
    message: str | None = None
    last_event_at: float = field(default_factory=time.monotonic)
    stall_redispatched: bool = False  # the watchdog re-dispatched it once already
    # (seconds since its stage clock started, requests sent, requests ended) of each
    # progress report of its latest attempt: the saturation check's view of what is in
    # flight (docs/answers.md).
    samples: list[tuple[float, int, int]] = field(default_factory=list)

    def add_sample(self, elapsed_s: float, sent: int, done: int) -> None:
        """Keep a progress report; beyond MAX_SAMPLES every other one is dropped, so a
        long stage keeps its whole span at a coarser grain in bounded memory."""
        if elapsed_s <= 0:
            return  # its stage clock has not started (connections being opened)
        self.samples.append((elapsed_s, sent, done))
        if len(self.samples) > MAX_SAMPLES:
            self.samples = self.samples[::2]

    @property
    def elapsed_s(self) -> float | None:
        """Seconds its stage clock ran at its last progress report (None: none yet)."""
        return self.samples[-1][0] if self.samples else None

    @property
    def highest_attempt(self) -> int:
        """The highest attempt number known to have run (0: none); a new attempt must be
        numbered above it, even after Redis lost its attempt counter."""
        return max([self.attempt or 0, self.finished_attempt or 0, *self.ingested])

    @property
    def settled(self) -> bool:
        """True once nothing more is expected for this shard."""
        return self.state in SETTLED

    @property
    def planned(self) -> int | None:
        """Requests the shard plans to send, when fixed by count."""
        return self.spec.requests


class Coordinator:
    """State of one run of any kind, advanced by events and ingested batches: what the
    control plane drives. A planned run (:class:`RunCoordinator`) dispatches its stages
    in order; a shadow session (:class:`SessionCoordinator`) has none."""

    def __init__(
        self,
        run_id: str,
        scenario: Scenario,
        store: RunStore,
        stages: list[Stage],
        wait_for_workers: bool = False,
    ) -> None:
        self.run_id = run_id
        self.scenario = scenario
        self.store = store
        self.stages = stages
        self.shards: dict[str, ShardProgress] = {
            spec.shard_id: ShardProgress(spec) for stage in self.stages for spec in stage.shards
        }
        self.state = RunState.RUNNING
        self.records_ingested = 0
        self.created = time.monotonic()
        self.first_dispatch_at: float | None = None
        self.wait_for_workers = wait_for_workers
        self.cancel_deadline: float | None = None  # set when a cancel was requested
        # Last dispatch, applied event or ingested batch: the watchdog's clock.
        self.last_progress_at = time.monotonic()

    # ------------------------------------------------------------------ queries

    @property
    def current_stage(self) -> int:
        """Index of the first stage with an unsettled shard (len(stages) when all are)."""
        for stage in self.stages:
            if not self.stage_settled(stage):
                return stage.index
        return len(self.stages)

    def stage_settled(self, stage: Stage) -> bool:
        """True when every shard of ``stage`` is settled."""
        return all(self.shards[s.shard_id].settled for s in stage.shards)

    @property
    def complete(self) -> bool:
        """True once every shard is settled (or the run ended otherwise)."""
        return self.state != RunState.RUNNING or all(s.settled for s in self.shards.values())

    @property
    def quiet(self) -> bool:
        """True when no shard is dispatched or running (nothing more will arrive)."""
        return not any(s.state in IN_FLIGHT for s in self.shards.values())

    def to_dispatch(self) -> list[ShardProgress]:
        """Planned shards of the current stage; marked dispatched by the caller."""
        index = self.current_stage
        if self.state != RunState.RUNNING or index >= len(self.stages):
            return []
        return [
            self.shards[s.shard_id]
            for s in self.stages[index].shards
            if self.shards[s.shard_id].state == ShardState.PLANNED
        ]

    def stalled(self, now: float, timeout_s: float) -> list[ShardProgress]:
        """The current stage's unsettled shards, when the run made no progress (no
        dispatch, event or ingested batch) for ``timeout_s``; else nothing."""
        index = self.current_stage
        if (
            self.state != RunState.RUNNING
            or self.cancel_deadline is not None
            or index >= len(self.stages)
            or now - self.last_progress_at < timeout_s
        ):
            return []
        shards = (self.shards[s.shard_id] for s in self.stages[index].shards)
        return [shard for shard in shards if not shard.settled]

    def recorded(self, shard: ShardProgress) -> int:
        """Records stored for the shard's latest attempt (the one that counts if it fails)."""
        if shard.attempt is None:
            return 0
        row = self.store.con.execute(
            "SELECT count(*) FROM request_records WHERE run_id = ? AND shard_id = ? "
            "AND attempt = ?",
            [self.run_id, shard.spec.shard_id, shard.attempt],
        ).fetchone()
        return int(row[0]) if row else 0

    def missing(self, shard: ShardProgress, reason: str) -> str:
        """``reason``, with how many of the shard's planned requests were not recorded."""
        recorded = self.recorded(shard)
        if shard.planned is None:
            return f"{reason}; {recorded} requests recorded"
        return f"{reason}; {shard.planned - recorded} of {shard.planned} requests missing"

    def silent_workers(self, silent_s: float) -> dict[str, list[ShardProgress]]:
        """Running shards that sent no event for ``silent_s``, by their worker."""
        by_worker: dict[str, list[ShardProgress]] = {}
        now = time.monotonic()
        for shard in self.shards.values():
            if (
                shard.state == ShardState.RUNNING
                and shard.worker
                and now - shard.last_event_at > silent_s
            ):
                by_worker.setdefault(shard.worker, []).append(shard)
        return by_worker

    # ------------------------------------------------------------------ transitions

    def mark_dispatched(self, shard: ShardProgress) -> None:
        """The shard's task is about to be sent (recorded first, so a crash re-sends it)."""
        shard.state = ShardState.DISPATCHED
        shard.dispatches += 1
        shard.dispatched_at = self.last_progress_at = time.monotonic()
        if self.first_dispatch_at is None:
            self.first_dispatch_at = shard.dispatched_at
        self.store.shard_dispatched(self.run_id, shard.spec.shard_id, shard.dispatches)

    def on_event(self, event: dict[str, str]) -> None:
        """Apply one lifecycle event from a worker."""
        shard = self.shards.get(event.get("shard_id", ""))
        if shard is None or shard.settled:
            return  # unknown shard, or a late duplicate for a settled one
        attempt = int(event["attempt"])
        kind = event["type"]
        shard_id = shard.spec.shard_id
        shard.last_event_at = time.monotonic()
        if kind == EventType.STARTED:
            if shard.attempt is not None and attempt < shard.attempt:
                return  # an older attempt's late start
            shard.state, shard.attempt, shard.worker = (
                ShardState.RUNNING,
                attempt,
                event.get("worker"),
            )
            shard.done = shard.errors = 0
            shard.ttft_p50_ms = None  # the new attempt's own figure comes with its progress
            shard.samples = []
            self.store.attempt_started(self.run_id, shard_id, attempt, shard.worker or "")
        elif attempt != shard.attempt:
            return  # from an attempt that a newer one superseded
        elif kind == EventType.PROGRESS:
            shard.done, shard.errors = int(event["done"]), int(event["errors"])
            ttft = float(event["ttft_p50_ms"])
            shard.ttft_p50_ms = ttft if ttft >= 0 else shard.ttft_p50_ms
            if "elapsed_s" in event:  # workers before v11 did not report it
                shard.add_sample(float(event["elapsed_s"]), int(event["sent"]), shard.done)
        elif kind == EventType.FINISHED:
            shard.finished_attempt, shard.expected_batches = attempt, int(event["batches"])
            shard.done, shard.errors = int(event["records"]), int(event["errors"])
            health = {k: v for k, v in event.items() if k not in _LIFECYCLE_FIELDS}
            self.store.attempt_ended(
                self.run_id,
                shard_id,
                attempt,
                "finished",
                shard.done,
                shard.expected_batches,
                None,
                health,
            )
        elif kind == EventType.FAILED:
            message = event.get("message", "shard failed")
            self.store.attempt_ended(
                self.run_id, shard_id, attempt, ShardState.FAILED, 0, 0, message
            )
            self.fail(shard, message)
        self.last_progress_at = time.monotonic()  # an event of the attempt that counts

    def on_ingested(self, per_attempt: dict[tuple[str, int], int], rows: int) -> None:
        """Count batches stored per (shard, attempt)."""
        self.records_ingested += rows
        if rows:
            self.last_progress_at = time.monotonic()
        for (shard_id, attempt), count in per_attempt.items():
            shard = self.shards.get(shard_id)
            if shard is not None:
                shard.ingested[attempt] = shard.ingested.get(attempt, 0) + count

    def settle(self) -> None:
        """Finished shards whose announced batches are all stored become settled."""
        for shard in self.shards.values():
            attempt = shard.finished_attempt
            if shard.settled or attempt is None or shard.expected_batches is None:
                continue
            if shard.ingested.get(attempt, 0) >= shard.expected_batches:
                shard.state = ShardState.FINISHED
                self.store.shard_done(
                    self.run_id, shard.spec.shard_id, ShardState.FINISHED, attempt, None
                )

    def worker_lost(self, shard: ShardProgress, max_attempts: int) -> bool:
        """The worker running ``shard`` died: True if it should be dispatched again."""
        if shard.attempt is not None:
            self.store.attempt_ended(
                self.run_id, shard.spec.shard_id, shard.attempt, "abandoned", None, None,
                f"worker {shard.worker} lost",
            )  # fmt: skip
        if shard.dispatches >= max_attempts:
            self.fail(
                shard,
                f"worker lost {shard.dispatches} times, the most "
                f"{env_name('control.max_attempts')} allows (last: {shard.worker})",
            )
            return False
        shard.state, shard.worker = ShardState.PLANNED, None
        return True

    def redispatch(self, shard: ShardProgress, reason: str, max_attempts: int) -> bool:
        """Run ``shard`` again as a new attempt because of ``reason`` (a running attempt
        is abandoned, its records kept apart); a shard dispatched ``max_attempts`` times
        fails instead, saying how many requests are missing. True if it runs again."""
        if shard.state == ShardState.RUNNING and shard.attempt is not None:
            self.store.attempt_ended(
                self.run_id, shard.spec.shard_id, shard.attempt, "abandoned", None, None, reason
            )
        if shard.dispatches >= max_attempts:
            tried = (
                f"dispatched {shard.dispatches} times, the most "
                f"{env_name('control.max_attempts')} allows"
            )
            self.fail(shard, self.missing(shard, f"{reason}; {tried}"))
            return False
        shard.state, shard.worker = ShardState.PLANNED, None
        shard.finished_attempt = shard.expected_batches = None
        self.last_progress_at = time.monotonic()
        return True

    def fail(self, shard: ShardProgress, message: str) -> None:
        """Settle ``shard`` as failed with ``message``."""
        shard.state, shard.message = ShardState.FAILED, message
        self.store.shard_done(
            self.run_id, shard.spec.shard_id, ShardState.FAILED, shard.attempt, message
        )

    def settle_many(self, shards: list[ShardProgress], state: ShardState, reason: str) -> None:
        """Settle open ``shards`` as ``state`` (failed, cancelled) with ``reason``.

        Shards that never started are settled in one statement: a run may have up to
        MAX_SHARDS_PER_RUN of them, and this runs on the control loop."""
        open_shards = [shard for shard in shards if not shard.settled]
        unstarted = [s.spec.shard_id for s in open_shards if s.attempt is None]
        self.store.settle_unstarted(self.run_id, unstarted, state, reason)
        for shard in open_shards:
            shard.state, shard.message = state, reason
            if shard.attempt is not None:
                shard_id = shard.spec.shard_id
                self.store.shard_done(self.run_id, shard_id, state, shard.attempt, reason)

    def cancel_unsettled(self, reason: str) -> None:
        """Settle every open shard as cancelled (their records so far stay visible)."""
        self.settle_many(list(self.shards.values()), ShardState.CANCELLED, reason)
        self.finish(RunState.CANCELLED)

    def finish(self, state: RunState | None = None) -> RunState:
        """Record the run's final state (finished only if every shard finished)."""
        if state is None:
            ok = all(s.state == ShardState.FINISHED for s in self.shards.values())
            state = RunState.FINISHED if ok else RunState.FAILED
        self.state = state
        self.store.finish_run(self.run_id, state)
        return state


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
        open_loop = any(s.rate is not None and not s.rate.replay for s in stage.shards)
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
            [
                PlannedShard(
                    s.shard_id,
                    s.stage,
                    s.provider.name,
                    s.region,
                    s.concurrency,
                    s.requests,
                    stage_concurrency=stage.level_of(s.provider.name),
                    spec=s,
                )
                for stage in stages
                for s in stage.shards
            ],
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


def session_shards(config: GatewayConfig) -> list[SessionShard]:
    """The record streams of a session: the primary's, and each shadow's per region."""
    shards = [SessionShard(PRIMARY_SHARD, config.primary.name, config.gateway_region)]
    shards += [
        SessionShard(shadow_shard_id(shadow.name, region), shadow.name, region)
        for shadow in config.shadows
        for region in config.regions
    ]
    return shards


class SessionCoordinator(Coordinator):
    """A shadow session: a continuous run whose records are ingested until it is stopped.

    Nothing is dispatched (the gateway enqueues shadow tasks itself) and there are no
    lifecycle events; stopping it goes through the cancel path of the control plane (the
    workers see the cancel key and skip the session's remaining tasks), which drains the
    streams for the grace period and then finishes the session.
    """

    def __init__(self, run_id: str, scenario: Scenario, store: RunStore) -> None:
        # No stages: nothing is planned or dispatched. Never fail a region for lack of
        # workers: the gateway's traffic, not a plan, decides when shadows are needed.
        super().__init__(run_id, scenario, store, stages=[], wait_for_workers=True)

    @classmethod
    def open(cls, run_id: str, config: GatewayConfig, store: RunStore) -> SessionCoordinator:
        """A new session, recorded with its shards (accepted from the start)."""
        scenario = config.session_scenario()
        shards = session_shards(config)
        register_session(store.con, run_id, config.name, config.model_dump_json())
        store.create_run(
            run_id,
            scenario,
            [PlannedShard(s.shard_id, 0, s.provider, s.region, 0, None) for s in shards],
        )
        activate_session(store.con, run_id, shards)
        return cls(run_id, scenario, store)

    @classmethod
    def resume_session(cls, run_id: str, store: RunStore) -> SessionCoordinator:
        """A session left running (after a control-plane restart)."""
        scenario = Scenario.model_validate_json(store.scenario_json(run_id))
        coordinator = cls(run_id, scenario, store)
        coordinator.records_ingested = store.records_count(run_id)
        return coordinator

    @property
    def complete(self) -> bool:
        """Only a stop ends a session."""
        return self.state != RunState.RUNNING

    @property
    def quiet(self) -> bool:
        """Records may arrive at any time: a stop always drains for its full grace period."""
        return False

    def to_dispatch(self) -> list[ShardProgress]:
        """Nothing: the gateway enqueues shadow tasks itself."""
        return []

    def stalled(self, now: float, timeout_s: float) -> list[ShardProgress]:
        """Never: a session is quiet whenever its gateway has no traffic."""
        return []

    def cancel_unsettled(self, reason: str) -> None:
        """The stop's grace period is over: the session ends finished."""
        self.finish(RunState.FINISHED)

    def finish(self, state: RunState | None = None) -> RunState:
        """Settle the session's shards with their record counts and end the run."""
        close_session(self.store.con, self.run_id)
        self.state = state or RunState.FINISHED
        self.store.finish_run(self.run_id, self.state)
        return self.state
