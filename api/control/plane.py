"""The control plane loop: dispatch shards, consume every active run's streams, recover.

One loop serves all active runs (the embedded ``tokenbench run`` uses it with one run,
``tokenbench serve`` with many). Each iteration:

1. sends the tasks of newly reachable shards (stage order; a shard is marked dispatched
   in DuckDB first, and its Celery task id is fixed, so a re-send is harmless: the
   worker skips a shard that is done or owned by a live worker);
2. reads the runs' event and record streams with one consumer group, appends record
   batches to DuckDB, applies events, and acknowledges entries only after that;
3. re-dispatches the shards of workers whose heartbeat vanished (at most
   ``max_attempts`` executions), and fails the pending shards of a region that has no
   live worker for ``no_worker_grace_s``.

On start it resumes runs left ``running`` in DuckDB and claims stream entries that a
previous control plane read but never acknowledged (XAUTOCLAIM), so a restart loses
and doubles nothing.

The parts, each a module of its own: sending shards (``api/control/dispatch.py``),
reading the streams (``api/control/streams.py``), recovering from Redis faults, lost
workers and stalled runs (``api/control/recovery.py``, docs/security.md, redis-faults),
and the adaptive runs' decisions and checks (``api/control/adaptive/driver.py``).

A step that raises an unexpected error does not end the loop that serves every run:
:meth:`ControlPlane.serve_forever` logs it with the run it happened on, counts it
(``tokenbench_control_step_errors_total`` on /metrics) and goes on after a back-off.

Shadow-traffic sessions (docs/shadow.md) are runs of the same loop with a third stream,
the gateway's per-request captures, and no shards to dispatch; they end when stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING

import duckdb
from celery import Celery
from redis.asyncio import Redis
from redis.exceptions import RedisError, ResponseError

from analytics.shadow.capture import ensure_shadow_schema, session_ids
from analytics.sql.results import first_row
from analytics.store.runs import RunStore
from api.control.adaptive.driver import AdaptiveDriver
from api.control.coordinator import Coordinator, about_run, run_of
from api.control.dispatch import Dispatcher, live_workers
from api.control.queue_purge import purge_run_messages
from api.control.recovery import CANCEL_TTL_S, Recovery
from api.control.redis_faults import UNREACHABLE_ERRORS, is_nogroup
from api.control.run_coordinator import RunCoordinator, fail_unresumable
from api.control.run_spec import refresh_parts
from api.control.session_coordinator import SessionCoordinator
from api.control.spend import BUDGET_DRAIN_S, SpendWatch
from api.control.streams import StreamConsumer
from scenarios.gateway_config import GatewayConfig
from scenarios.loader import ScenarioError
from scenarios.model import Scenario
from scenarios.settings import ControlSettings, TeamSettings
from scenarios.wire.contract import (
    RunState,
    attempts_key,
    batch_seq_key,
    cancel_key,
    region_queue,
    run_spec_key,
    token_key,
)

if TYPE_CHECKING:
    from api.control.queue import RunQueue

log = logging.getLogger("tokenbench.control")
# A closed run's attempt counters: kept as long as its cancel key, so that a straggler
# execution is still numbered above the stored attempts.
ATTEMPTS_TTL_S = CANCEL_TTL_S

HEALTH_CHECK_S = 1.0
# After an unexpected error in a step, the loop waits before the next one: this long
# after the first, twice as long after each further one in a row, up to the maximum
# (a step that fails every time must not spin a core or flood the log).
STEP_ERROR_BACKOFF_S = 1.0
MAX_STEP_ERROR_BACKOFF_S = 30.0


def new_run_id() -> str:
    """A sortable, unique run id."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


def step_error_backoff(failures: int) -> float:
    """Seconds to wait after ``failures`` unexpected step errors in a row (at least 1)."""
    doublings = max(0, min(failures - 1, 16))
    return min(STEP_ERROR_BACKOFF_S * float(1 << doublings), MAX_STEP_ERROR_BACKOFF_S)


class ControlPlane:
    """Drives every active run; owns the DuckDB writer connection's run state."""

    def __init__(
        self,
        redis: Redis,
        con: duckdb.DuckDBPyConnection,
        celery: Celery,
        settings: ControlSettings,
        teams: TeamSettings | None = None,
    ) -> None:
        self.redis = redis
        self.con = con
        self.store = RunStore(con)
        self.celery = celery
        self.settings = settings
        self.runs: dict[str, Coordinator] = {}
        self.consumer = f"control-{uuid.uuid4().hex[:8]}"
        self.streams = StreamConsumer(redis, con, self.runs, self.consumer)
        self.dispatcher = Dispatcher(redis, con, celery)
        self.adaptive = AdaptiveDriver(redis, con, settings.max_streams_per_shard)
        self.recovery = Recovery(redis, con, settings, self.runs, self.streams, self.dispatcher)
        # Budgets (api/control/spend.py), with the service's team defaults.
        self.spend = SpendWatch(con, teams)
        # Unexpected errors a step raised (serve_forever logs each and goes on): /metrics.
        self.step_errors = 0
        self._last_health_check = 0.0
        self._last_watchdog = 0.0
        self._wake = asyncio.Event()
        # Queued runs (api/control/queue.py), set by the REST app: started by the loop
        # when their targets are free and their team is under its quota.
        self.queue: RunQueue | None = None

    # ------------------------------------------------------------------ runs

    async def start(self) -> list[str]:
        """Resume runs left running and reclaim their unacknowledged entries."""
        resumed = []
        ensure_shadow_schema(self.con)
        sessions = session_ids(self.con)
        for run_id in self.store.running_runs():
            try:
                coordinator = (
                    SessionCoordinator.resume_session(run_id, self.store)
                    if run_id in sessions
                    else RunCoordinator.resume(
                        run_id, self.store, self.settings.max_streams_per_shard
                    )
                )
            except Exception as exc:  # one bad run must not stop the others
                self._fail_unresumable(run_id, exc)
                continue
            self.runs[run_id] = coordinator
            await self.streams.create_groups(run_id)
            await self.streams.reclaim(run_id)
            if isinstance(coordinator, RunCoordinator):
                await self.adaptive.restore_stops(coordinator)
            resumed.append(run_id)
        # Runs left running, and a Redis without the marker: it lost their state.
        await self.recovery.check_state(lost_if_missing=bool(self.runs))
        return resumed

    def _fail_unresumable(self, run_id: str, exc: Exception) -> None:
        """A run left running that cannot be rebuilt ends failed with the reason."""
        if isinstance(exc, ScenarioError):
            reason = "; ".join(f"{p.path}: {p.message}" for p in exc.problems)
        elif isinstance(exc, ValueError | RuntimeError | LookupError):
            reason = str(exc)
        else:
            reason = f"{type(exc).__name__} (see the control plane's log)"
        reason = f"cannot be resumed after a control-plane restart: {reason}"
        log.error("run %s %s", run_id, reason, exc_info=exc)
        try:
            fail_unresumable(self.store, run_id, reason)
        except Exception:  # logged; the control plane still starts
            log.exception("run %s: could not be marked failed", run_id)

    async def submit(
        self,
        scenario: Scenario,
        run_id: str | None = None,
        wait_for_workers: bool = False,
        workers: Mapping[str, int] | None = None,
    ) -> RunCoordinator:
        """Create a run; its first stage is dispatched by the loop right away.
        ``wait_for_workers`` lets its shards wait for a region's first worker. Each stage
        is split over ``workers``, the live worker processes per region (docs/scaling.md):
        read here unless the caller read them already for this submission."""
        run_id = run_id or new_run_id()
        if workers is None:
            workers = await live_workers(self.redis, scenario.regions)
        # Planning (linear in the shards, at most MAX_SHARDS_PER_RUN) and the run's rows
        # are done in a worker thread, on a cursor of its own (its own transaction, rolled
        # back on failure), so the event loop keeps serving while a large run is created.
        coordinator = await asyncio.to_thread(
            _create_run,
            self.con.cursor(),
            run_id,
            scenario,
            self.settings.max_streams_per_shard,
            dict(workers),
            self.settings.max_queued_bytes,
        )
        coordinator.store = self.store  # later transitions are written on the loop's connection
        coordinator.wait_for_workers = wait_for_workers
        await self.streams.create_groups(run_id)
        self.runs[run_id] = coordinator
        self._wake.set()
        return coordinator

    async def open_session(self, config: GatewayConfig) -> SessionCoordinator:
        """Open a shadow session: its records and captures are ingested until it stops."""
        coordinator = SessionCoordinator.open(new_run_id(), config, self.store)
        # Groups first: the loop reads the streams of every run in ``runs``, and a read
        # of a stream without its group would look like Redis lost its state.
        await self.streams.create_groups(coordinator.run_id, session=True)
        self.runs[coordinator.run_id] = coordinator
        self._wake.set()
        return coordinator

    async def cancel(
        self, run_id: str, drain_s: float = 10.0, reason: str = "run cancelled"
    ) -> None:
        """Tell workers to stop the run. The loop keeps storing what arrives for up to
        ``drain_s``, then settles the open shards as cancelled (with ``reason``) and
        closes the run."""
        await self.redis.set(cancel_key(run_id), 1, ex=CANCEL_TTL_S)
        coordinator = self.runs.get(run_id)
        if coordinator is not None and coordinator.cancel_deadline is None:
            coordinator.cancel_deadline = time.monotonic() + drain_s
            coordinator.cancel_reason = reason
            self._wake.set()

    async def run_until_done(self, run_id: str) -> str:
        """Drive the loop until ``run_id`` completes; return its final state."""
        while run_id in self.runs:
            await self.step()
        return self.store_state(run_id)

    async def serve_forever(self, stop: asyncio.Event) -> None:
        """Drive the loop until ``stop`` is set (the REST control plane's background task).

        A step that fails does not end the loop, which serves every run: a Redis or OS
        error is retried after a second; any other error is logged with the run it
        happened on (when known), counted (``step_errors``, on /metrics) and the loop
        goes on after a back-off that grows while steps keep failing."""
        failures = 0
        while not stop.is_set():
            if self.queue is not None:
                await self._start_queued()
            if self.runs:
                try:
                    await self.step()
                    failures = 0
                except (RedisError, OSError) as exc:
                    # Broker briefly unreachable: nothing was acknowledged, retry shortly.
                    log.warning("control loop: %s; retrying", exc)
                    await asyncio.sleep(1.0)
                except Exception as exc:
                    failures += 1
                    self.step_errors += 1
                    wait = step_error_backoff(failures)
                    run_id = run_of(exc)
                    log.error(
                        "control loop: unexpected error in a step%s (%d in a row); "
                        "going on in %.0f s",
                        f" on run {run_id}" if run_id else "",
                        failures,
                        wait,
                        exc_info=exc,
                    )
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), wait)
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), 1.0)
                self._wake.clear()

    async def _start_queued(self) -> None:
        """Start the queued runs that may start now; an error is logged, never ends the loop."""
        assert self.queue is not None
        try:
            await self.queue.start_due()
        except Exception:
            self.step_errors += 1
            log.exception("control loop: starting queued runs failed; trying again")

    def store_state(self, run_id: str) -> str:
        """State of a run as stored."""
        row = first_row(self.con.execute("SELECT state FROM runs WHERE run_id = ?", [run_id]))
        return str(row[0]) if row else "unknown"

    # ------------------------------------------------------------------ the loop

    async def step(self) -> None:
        """One iteration: dispatch, consume, check workers and Redis, close completed
        runs. A Redis outage is logged and retried on the next step; the watchdog runs
        whether Redis answers or not."""
        try:
            await self._redis_step()
        except UNREACHABLE_ERRORS as exc:
            await self.recovery.unreachable(exc)
        except RedisError as exc:  # e.g. out of memory: refused, but the watchdog still runs
            log.warning("Redis refused a command (%s): retrying", exc)
            await asyncio.sleep(1.0)
        now = time.monotonic()
        if now - self._last_watchdog >= HEALTH_CHECK_S:
            self._last_watchdog = now
            for coordinator in list(self.runs.values()):
                with about_run(coordinator.run_id):
                    await self.recovery.watchdog(coordinator)
        try:
            await self._close_completed()
        except UNREACHABLE_ERRORS as exc:
            await self.recovery.unreachable(exc)

    async def _redis_step(self) -> None:
        if self.recovery.unreachable_since is not None:
            await self.recovery.reachable_again()
        for coordinator in list(self.runs.values()):
            with about_run(coordinator.run_id):
                await self._dispatch(coordinator)
        try:
            await self.streams.consume()
        except ResponseError as exc:
            if not is_nogroup(exc):
                raise
            await self.recovery.group_missing()
            return
        for coordinator in list(self.runs.values()):
            if isinstance(coordinator, RunCoordinator):
                with about_run(coordinator.run_id):
                    await self.adaptive.check_stage(coordinator)
        if time.monotonic() - self._last_health_check >= HEALTH_CHECK_S:
            self._last_health_check = time.monotonic()
            await self.recovery.check_state()
            for coordinator in list(self.runs.values()):
                with about_run(coordinator.run_id):
                    await self.recovery.check_workers(coordinator)
                    if isinstance(coordinator, RunCoordinator):
                        await refresh_parts(self.redis, coordinator.run_id)
        # Budgets: a run whose recorded spend reached its cap or its team's month stops.
        for coordinator in list(self.runs.values()):
            if isinstance(coordinator, RunCoordinator):
                with about_run(coordinator.run_id):
                    reason = await self.spend.check(coordinator)
                    if reason is not None:
                        await self.cancel(coordinator.run_id, BUDGET_DRAIN_S, reason)

    async def _dispatch(self, coordinator: Coordinator) -> None:
        if coordinator.cancel_deadline is not None:
            return
        if isinstance(coordinator, RunCoordinator) and coordinator.awaiting_decision:
            await self.adaptive.decide(coordinator)
        await self.dispatcher.dispatch(coordinator)

    async def _close_completed(self) -> None:
        for coordinator in list(self.runs.values()):
            with about_run(coordinator.run_id):
                if coordinator.cancel_deadline is not None and (
                    coordinator.quiet or time.monotonic() >= coordinator.cancel_deadline
                ):
                    coordinator.cancel_unsettled(coordinator.cancel_reason)
                if coordinator.complete:
                    if coordinator.state == RunState.RUNNING:
                        coordinator.finish()
                    await self._close_run(coordinator)

    # ------------------------------------------------------------------ closing runs

    async def _close_run(self, coordinator: Coordinator) -> None:
        """The run is settled in DuckDB: drop its streams from Redis. The done and cancel
        keys stay (they expire) so that a late redelivered task is still skipped."""
        if coordinator.run_id in self.streams.records.runs():  # a cancelled run's last records
            await self.streams.store_due(force=True)
        if isinstance(coordinator, RunCoordinator):
            await self.streams.drain_metrics(coordinator.run_id)
            self.spend.settle(coordinator.run_id)
        streams = self.streams.streams(coordinator.run_id)
        if isinstance(coordinator, SessionCoordinator):
            # Batch counters of the session's shards; publishers after the stop are lost.
            streams += tuple(
                batch_seq_key(coordinator.run_id, shard_id)
                for (shard_id,) in self.con.execute(
                    "SELECT shard_id FROM shards WHERE run_id = ?", [coordinator.run_id]
                ).fetchall()
            )
        self.runs.pop(coordinator.run_id, None)
        await self.redis.delete(*streams)
        if isinstance(coordinator, RunCoordinator):
            await self._release_run(coordinator)

    async def _release_run(self, coordinator: RunCoordinator) -> None:
        """Free what a closed run holds in Redis: the tasks still queued for its shards
        (a cancelled or failed run's, e.g. in a region without a live worker) and
        unacknowledged ones kombu would put back, its stored providers and workload, its
        claim tokens and (expiring) its attempt counters. Done, cancel, stop and
        calibration keys expire by themselves."""
        run_id = coordinator.run_id
        self.dispatcher.spec_parts.forget(run_id)
        if coordinator.state != RunState.FINISHED:
            queues = {region_queue(r) for r in coordinator.scenario.regions}
            queues |= {region_queue(s.spec.region) for s in coordinator.shards.values()}
            purged = await purge_run_messages(self.redis, run_id, sorted(queues))
            if purged.queued or purged.unacked:
                log.info(
                    "run %s: removed %d queued and %d unacknowledged task(s) from Redis",
                    run_id,
                    purged.queued,
                    purged.unacked,
                )
        await self.redis.delete(run_spec_key(run_id))
        async with self.redis.pipeline(transaction=False) as pipe:
            for shard_id in coordinator.shards:
                pipe.expire(attempts_key(run_id, shard_id), ATTEMPTS_TTL_S)
                # Without its claim token a straggler execution cannot publish any more:
                # it would re-create the streams just deleted, and they never expire.
                pipe.delete(token_key(run_id, shard_id))
            await pipe.execute()


def _create_run(
    cursor: duckdb.DuckDBPyConnection,
    run_id: str,
    scenario: Scenario,
    max_streams_per_shard: int,
    workers: dict[str, int],
    max_queued_bytes: int,
) -> RunCoordinator:
    """Plan a run and record it on ``cursor`` (closed afterwards), in a worker thread."""
    try:
        return RunCoordinator.create(
            run_id, scenario, RunStore(cursor), max_streams_per_shard, workers, max_queued_bytes
        )
    finally:
        cursor.close()
