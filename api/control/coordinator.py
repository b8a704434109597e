"""The lifecycle of one run: which shards to dispatch, and what each event means.

A run is a sequence of stages; a stage is settled when each of its shards is settled:
finished with every announced batch ingested, or failed. The coordinator is a state
machine fed by the control plane; every transition is written to DuckDB before the
stream entry that caused it is acknowledged, so a restarted control plane rebuilds the
same state from the database.

The control plane drives every run through :class:`Coordinator`. A planned run is a
:class:`~api.control.run_coordinator.RunCoordinator` (``api/control/run_coordinator.py``,
rebuilt on a restart from the plan stored when the run was created); a shadow-traffic
session (``api/control/session_coordinator.py``, docs/shadow.md) is a run of another
shape: no stages to dispatch, a fixed set of record streams (its shards), and no end
until it is stopped.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from analytics.sql.results import first_row
from analytics.store.runs import CacheReset, RunStore
from api.control.planner import Stage
from scenarios.model import Scenario
from scenarios.settings import env_name
from scenarios.wire.contract import IN_FLIGHT, SETTLED, EventType, RunState, ShardSpec, ShardState

# Fields of `shard_finished` that describe the lifecycle; the rest is the client's
# self-measurement (docs/load.md), stored as the attempt's health.
_LIFECYCLE_FIELDS = {"type", "shard_id", "attempt", "at", "records", "batches", "errors"}
# The attribute an error raised while the control loop worked on a run carries its id in.
_RUN_ATTRIBUTE = "tokenbench_run_id"
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
        self.cancel_reason = "run cancelled"  # what the cancelled shards say (a budget's)
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
        row = first_row(
            self.store.con.execute(
                "SELECT count(*) FROM request_records WHERE run_id = ? AND shard_id = ? "
                "AND attempt = ?",
                [self.run_id, shard.spec.shard_id, shard.attempt],
            )
        )
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
        elif kind == EventType.CACHE_RESET:
            self.store.cache_reset(_cache_reset(self.run_id, shard, attempt, event))
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


@contextlib.contextmanager
def about_run(run_id: str) -> Iterator[None]:
    """Work of the control loop on one run: an error raised inside carries the run's id
    (the innermost one), which :func:`run_of` reads to name the run in the log."""
    try:
        yield
    except Exception as exc:
        if run_of(exc) is None:
            with contextlib.suppress(AttributeError, TypeError):  # e.g. an exception with slots
                setattr(exc, _RUN_ATTRIBUTE, run_id)
        raise


def run_of(exc: BaseException) -> str | None:
    """The run an error was raised on, when it happened inside :func:`about_run`."""
    run_id = getattr(exc, _RUN_ATTRIBUTE, None)
    return run_id if isinstance(run_id, str) else None


def _cache_reset(
    run_id: str, shard: ShardProgress, attempt: int, event: dict[str, str]
) -> CacheReset:
    """The stored form of a worker's cache-reset event (bad numbers are unknown)."""
    spec = shard.spec

    def number(name: str) -> float | None:
        try:
            value = float(event.get(name, ""))
        except ValueError:
            return None
        return value if math.isfinite(value) and value >= 0 else None

    http_status = number("http_status")
    return CacheReset(
        run_id=run_id,
        stage=spec.stage,
        provider=spec.provider.name,
        region=event.get("region") or spec.region,
        worker=event.get("worker") or shard.worker,
        shard_id=spec.shard_id,
        attempt=attempt,
        started_at=number("started_at"),
        status=event.get("status", "error")[:16],
        http_status=None if http_status is None else int(http_status),
        message=event.get("message", "")[:200] or None,
    )
