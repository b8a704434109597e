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

Redis faults (docs/security.md, redis-faults; ``api/control/redis_faults.py``): while Redis is
unreachable the loop retries every second; when it is back, it reclaims what it had
read but not acknowledged and sends what it could not. When Redis lost its state (a
marker key or a consumer group is gone), it re-creates the groups and re-dispatches
every shard not yet settled in DuckDB as a new attempt (or fails it, saying how many
requests are missing). A watchdog handles a run without progress for
``stall_timeout_s``: its stuck shards are re-dispatched once, then failed.

Shadow-traffic sessions (docs/shadow.md) are runs of the same loop with a third stream,
the gateway's per-request captures, and no shards to dispatch; they end when stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from typing import Any

import duckdb
from celery import Celery
from redis.asyncio import Redis
from redis.exceptions import RedisError, ResponseError

from analytics.datasets.uploads import DatasetStore, UnknownDatasetError, workload_datasets
from analytics.shadow.capture import ensure_shadow_schema, ingest_captures, session_ids
from analytics.store.adaptive_runs import write_outcome
from analytics.store.runs import RunStore
from analytics.telemetry.ingest import ingest_scrapes
from api.control.adaptive import (
    MAX_MONITOR_INTERVAL_S,
    MONITOR_COST_FACTOR,
    MONITOR_INTERVAL_S,
    Decided,
    MonitorInput,
    MonitorResult,
    StopDecision,
    decide_next,
    monitor_stage,
    outcome_row,
)
from api.control.coordinator import (
    Coordinator,
    RunCoordinator,
    SessionCoordinator,
    ShardProgress,
    fail_unresumable,
)
from api.control.planner import Stage
from api.control.queue_purge import purge_run_messages
from api.control.record_buffer import RecordBuffer, store_due
from api.control.redis_faults import (
    UNREACHABLE_ERRORS,
    holds_state,
    is_nogroup,
    mark_state,
    prepare_redispatch,
    restore_batch_counters,
    task_queued,
)
from api.control.run_spec import RunSpecParts, refresh_parts
from scenarios.gateway_config import GatewayConfig
from scenarios.loader import ScenarioError
from scenarios.model import Scenario
from scenarios.settings import ControlSettings, env_name
from scenarios.wire import (
    DATASET_TTL_S,
    IN_FLIGHT,
    RUN_SHARD,
    MetricsBatch,
    RunState,
    ShardState,
    StreamKind,
    attempts_key,
    batch_seq_key,
    cancel_key,
    captures_stream,
    dataset_key,
    decode_captures,
    decode_event,
    events_stream,
    heartbeat_key,
    heartbeat_pattern,
    metrics_stream,
    owner_key,
    parse_stream,
    records_stream,
    region_queue,
    run_spec_key,
    shard_task_id,
    stop_key,
    token_key,
)

log = logging.getLogger("tokenbench.control")
# A stop key outlives any stage: a late re-dispatch of a stopped shard must still see it.
STOP_TTL_S = 7 * 24 * 3600
# A closed run's attempt counters: kept as long as its cancel key, so that a straggler
# execution is still numbered above the stored attempts.
ATTEMPTS_TTL_S = 24 * 3600

GROUP = "control"
READ_BLOCK_MS = 200
HEALTH_CHECK_S = 1.0
# Metrics-stream entries read per call while draining a closing run.
MAX_DRAIN_ENTRIES = 500


def new_run_id() -> str:
    """A sortable, unique run id."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


class ControlPlane:
    """Drives every active run; owns the DuckDB writer connection's run state."""

    def __init__(
        self,
        redis: Redis,
        con: duckdb.DuckDBPyConnection,
        celery: Celery,
        settings: ControlSettings,
    ) -> None:
        self.redis = redis
        self.con = con
        self.store = RunStore(con)
        self.celery = celery
        self.settings = settings
        self.runs: dict[str, Coordinator] = {}
        self.consumer = f"control-{uuid.uuid4().hex[:8]}"
        self._no_worker_since: dict[str, float] = {}
        self._last_health_check = 0.0
        self._last_watchdog = 0.0
        self._wake = asyncio.Event()
        self._unreachable_since: float | None = None
        self._reachable_at = 0.0  # when Redis answered again after an outage
        self._unsent: dict[tuple[str, str], ShardProgress] = {}  # send failed: resend
        self._state_marked = False  # the Redis state marker was seen or written
        self.records = RecordBuffer(con)  # read, stored in large parallel commits
        self.spec_parts = RunSpecParts()  # providers/workloads the shard messages refer to

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
            await self._create_groups(run_id)
            await self._reclaim(run_id)
            if isinstance(coordinator, RunCoordinator):
                await self._restore_stops(coordinator)
            resumed.append(run_id)
        # Runs left running, and a Redis without the marker: it lost their state.
        await self._check_state(lost_if_missing=bool(self.runs))
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
        self, scenario: Scenario, run_id: str | None = None, wait_for_workers: bool = False
    ) -> RunCoordinator:
        """Create a run; its first stage is dispatched by the loop right away.
        ``wait_for_workers`` lets its shards wait for a region's first worker."""
        run_id = run_id or new_run_id()
        # Each stage is split over the worker processes alive now (docs/scaling.md).
        workers = {r: await live_worker_count(self.redis, r) for r in scenario.regions}
        # Planning (linear in the shards, at most MAX_SHARDS_PER_RUN) and the run's rows
        # are done in a worker thread, on a cursor of its own (its own transaction, rolled
        # back on failure), so the event loop keeps serving while a large run is created.
        coordinator = await asyncio.to_thread(
            _create_run,
            self.con.cursor(),
            run_id,
            scenario,
            self.settings.max_streams_per_shard,
            workers,
            self.settings.max_queued_bytes,
        )
        coordinator.store = self.store  # later transitions are written on the loop's connection
        coordinator.wait_for_workers = wait_for_workers
        await self._create_groups(run_id)
        self.runs[run_id] = coordinator
        self._wake.set()
        return coordinator

    async def open_session(self, config: GatewayConfig) -> SessionCoordinator:
        """Open a shadow session: its records and captures are ingested until it stops."""
        coordinator = SessionCoordinator.open(new_run_id(), config, self.store)
        self.runs[coordinator.run_id] = coordinator
        await self._create_groups(coordinator.run_id)
        self._wake.set()
        return coordinator

    async def cancel(self, run_id: str, drain_s: float = 10.0) -> None:
        """Tell workers to stop the run. The loop keeps storing what arrives for up to
        ``drain_s``, then settles the open shards as cancelled and closes the run."""
        await self.redis.set(cancel_key(run_id), 1, ex=24 * 3600)
        coordinator = self.runs.get(run_id)
        if coordinator is not None and coordinator.cancel_deadline is None:
            coordinator.cancel_deadline = time.monotonic() + drain_s
            self._wake.set()

    async def run_until_done(self, run_id: str) -> str:
        """Drive the loop until ``run_id`` completes; return its final state."""
        while run_id in self.runs:
            await self.step()
        return self.store_state(run_id)

    async def serve_forever(self, stop: asyncio.Event) -> None:
        """Drive the loop until ``stop`` is set (the REST control plane's background task)."""
        while not stop.is_set():
            if self.runs:
                try:
                    await self.step()
                except (RedisError, OSError) as exc:
                    # Broker briefly unreachable: nothing was acknowledged, retry shortly.
                    log.warning("control loop: %s; retrying", exc)
                    await asyncio.sleep(1.0)
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), 1.0)
                self._wake.clear()

    def store_state(self, run_id: str) -> str:
        """State of a run as stored."""
        row = self.con.execute("SELECT state FROM runs WHERE run_id = ?", [run_id]).fetchone()
        return str(row[0]) if row else "unknown"

    # ------------------------------------------------------------------ the loop

    async def step(self) -> None:
        """One iteration: dispatch, consume, check workers and Redis, close completed
        runs. A Redis outage is logged and retried on the next step; the watchdog runs
        whether Redis answers or not."""
        try:
            await self._redis_step()
        except UNREACHABLE_ERRORS as exc:
            await self._unreachable(exc)
        except RedisError as exc:  # e.g. out of memory: refused, but the watchdog still runs
            log.warning("Redis refused a command (%s): retrying", exc)
            await asyncio.sleep(1.0)
        now = time.monotonic()
        if now - self._last_watchdog >= HEALTH_CHECK_S:
            self._last_watchdog = now
            for coordinator in list(self.runs.values()):
                await self._watchdog(coordinator)
        try:
            await self._close_completed()
        except UNREACHABLE_ERRORS as exc:
            await self._unreachable(exc)

    async def _redis_step(self) -> None:
        if self._unreachable_since is not None:
            await self._reachable_again()
        for coordinator in list(self.runs.values()):
            await self._dispatch(coordinator)
        try:
            await self._consume()
        except ResponseError as exc:
            if not is_nogroup(exc):
                raise
            await self._state_lost("a consumer group is gone")
            return
        for coordinator in list(self.runs.values()):
            if isinstance(coordinator, RunCoordinator):
                await self._check_stage(coordinator)
        if time.monotonic() - self._last_health_check >= HEALTH_CHECK_S:
            self._last_health_check = time.monotonic()
            await self._check_state(lost_if_missing=self._state_marked)
            for coordinator in list(self.runs.values()):
                await self._check_workers(coordinator)
                if isinstance(coordinator, RunCoordinator):
                    await refresh_parts(self.redis, coordinator.run_id)

    async def _close_completed(self) -> None:
        for coordinator in list(self.runs.values()):
            if coordinator.cancel_deadline is not None and (
                coordinator.quiet or time.monotonic() >= coordinator.cancel_deadline
            ):
                coordinator.cancel_unsettled("run cancelled")
            if coordinator.complete:
                if coordinator.state == RunState.RUNNING:
                    coordinator.finish()
                await self._close_run(coordinator)

    async def _dispatch(self, coordinator: Coordinator) -> None:
        if coordinator.cancel_deadline is not None:
            return
        if isinstance(coordinator, RunCoordinator) and coordinator.awaiting_decision:
            await self._decide(coordinator)
        shards = coordinator.to_dispatch()
        if shards and not await self._publish_datasets(coordinator):
            return
        for shard in shards:
            coordinator.mark_dispatched(shard)
            await self._send_shard(shard)

    # ------------------------------------------------------------------ adaptive load

    async def _decide(self, coordinator: RunCoordinator) -> None:
        """Every stage so far settled: decide (and store) the next ones, in a worker
        thread on a cursor of its own (docs/answers.md). A decision that fails ends the
        run as failed, with the reason in the log, rather than retrying it forever."""
        state = coordinator.adaptive
        if state.busy:
            return
        state.busy = True
        try:
            scenario = coordinator.scenario
            workers = {r: await live_worker_count(self.redis, r) for r in scenario.regions}
            decided = await asyncio.to_thread(
                _decide_stages,
                self.con.cursor(),
                coordinator.run_id,
                scenario,
                list(coordinator.stages),
                workers,
                self.settings.max_streams_per_shard,
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

    async def _check_stage(self, coordinator: RunCoordinator) -> None:
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

    async def _restore_stops(self, coordinator: RunCoordinator) -> None:
        """After a restart: the stop keys of stages ended early (Redis may have lost them)."""
        for (stage, provider), row in coordinator.adaptive.ended.items():
            if row.acted and stage < len(coordinator.stages):
                await self._stop_shards(coordinator, stage, provider)

    async def _send_shard(self, shard: ShardProgress) -> None:
        """Send a dispatched shard's task; kept to be sent again if Redis is unreachable."""
        spec = shard.spec
        self._unsent[(spec.run_id, spec.shard_id)] = shard
        if shard.dispatches > 1:
            await prepare_redispatch(self.redis, spec.run_id, spec.shard_id, shard.highest_attempt)
        await self._send(shard)
        del self._unsent[(spec.run_id, spec.shard_id)]

    async def _publish_datasets(self, coordinator: Coordinator) -> bool:
        """Make sure the datasets the run's shards read are in Redis (their TTL refreshed,
        or set again if Redis lost them); False, with the run's open shards failed, when
        a dataset is no longer stored."""
        for _, dataset_id in workload_datasets(coordinator.scenario.workload):
            key = dataset_key(dataset_id)
            if await self.redis.expire(key, DATASET_TTL_S):
                continue
            try:
                # In a thread, on a cursor of its own: a dataset may be 64 MiB.
                content = await asyncio.to_thread(_dataset_content, self.con.cursor(), dataset_id)
            except UnknownDatasetError:
                message = f"dataset {dataset_id} is not stored (any more): upload it again"
                for shard in coordinator.shards.values():
                    if not shard.settled:
                        coordinator.fail(shard, message)
                return False
            await self.redis.set(key, content, ex=DATASET_TTL_S)
        return True

    async def _send(self, shard: ShardProgress) -> None:
        spec = shard.spec
        # The message refers to the run's stored provider and workload (set again here
        # if Redis lost them): a large extra_body is not copied into every message.
        message = await self.spec_parts.message(self.redis, spec)
        await asyncio.to_thread(
            self.celery.send_task,
            RUN_SHARD,
            args=[message.model_dump(mode="json")],
            queue=region_queue(spec.region),
            task_id=shard_task_id(spec.run_id, spec.shard_id),
        )

    async def _consume(self) -> None:
        streams: dict[Any, Any] = {}
        for run_id in self.runs:
            for stream in self._streams(run_id):
                streams[stream] = ">"
        if not streams:
            return
        answer: Any = await self.redis.xreadgroup(
            GROUP,
            self.consumer,
            streams,
            count=self.records.read_count(),
            block=self.records.block_ms(READ_BLOCK_MS),
        )
        for stream, entries in answer or []:
            await self._handle(stream.decode() if isinstance(stream, bytes) else stream, entries)
        await store_due(self.records, self.redis, GROUP, self.runs)

    async def _handle(self, stream: str, entries: list[tuple[bytes, dict[bytes, bytes]]]) -> None:
        """Apply one stream's entries to its run, then acknowledge them."""
        run_id, kind = parse_stream(stream)
        coordinator = self.runs.get(run_id)
        if kind is StreamKind.RECORDS and coordinator is not None:
            # Acknowledged once stored, in the buffer's next flush (record_buffer.py).
            self.records.add(stream, run_id, entries)
            return
        if coordinator is not None and entries:
            if kind is StreamKind.CAPTURES:
                rows = [row for _, fields in entries for row in decode_captures(fields)]
                ingest_captures(self.con, rows)
            elif kind is StreamKind.METRICS:
                # Server telemetry (docs/telemetry.md): the read's entries in one
                # transaction, on a cursor of its own in a thread (as record parts are).
                payloads = [MetricsBatch.decode(f).ipc for _, f in entries]
                await asyncio.to_thread(_store_scrapes, self.con, payloads)
            else:
                for _, fields in entries:
                    coordinator.on_event(decode_event(fields))
            coordinator.settle()
        if entries:
            ids = [entry_id for entry_id, _ in entries]
            await self.redis.xack(stream, GROUP, *ids)
            if kind in (StreamKind.RECORDS, StreamKind.METRICS):
                # Stored and committed: the payloads need not stay in Redis memory.
                await self.redis.xdel(stream, *ids)

    async def _check_workers(self, coordinator: Coordinator) -> None:
        now = time.monotonic()
        # A shard is lost when it went silent and its worker's heartbeat expired. Right
        # after a Redis outage every shard was silent and heartbeats may have expired:
        # give the workers as long again to be heard from.
        after_outage = now - self._reachable_at < self.settings.worker_lost_after_s
        silent = (
            {} if after_outage else coordinator.silent_workers(self.settings.worker_lost_after_s)
        )
        for worker, shards in silent.items():
            region = shards[0].spec.region
            if await self.redis.exists(heartbeat_key(region, worker)):
                continue
            for shard in shards:
                # The owner key of a dead worker would make the re-sent task skip itself.
                await self.redis.delete(owner_key(coordinator.run_id, shard.spec.shard_id))
                coordinator.worker_lost(shard, self.settings.max_attempts)
        index = coordinator.current_stage
        if index >= len(coordinator.stages):
            return
        pending = {
            s.region
            for s in coordinator.stages[index].shards
            if not coordinator.shards[s.shard_id].settled
        }
        for region in pending:
            if coordinator.wait_for_workers or await live_worker_count(self.redis, region) > 0:
                self._no_worker_since.pop(region, None)
                continue
            since = self._no_worker_since.setdefault(region, now)
            if now - since < self.settings.no_worker_grace_s:
                continue
            stranded = [
                coordinator.shards[spec.shard_id]
                for spec in coordinator.stages[index].shards
                if spec.region == region
            ]
            reason = (
                f"no live worker in region {region!r} for "
                f"{self.settings.no_worker_grace_s:g} s ({env_name('control.no_worker_grace_s')})"
            )
            coordinator.settle_many(stranded, ShardState.FAILED, reason)

    # ------------------------------------------------------------------ Redis faults

    async def _unreachable(self, exc: BaseException) -> None:
        if self._unreachable_since is None:
            self._unreachable_since = time.monotonic()
            log.warning("Redis unreachable (%s): retrying every second", exc)
        await asyncio.sleep(1.0)

    async def _reachable_again(self) -> None:
        """Redis answers again: unless it lost its state, take back what was read but
        not acknowledged, and send what could not be sent."""
        since = self._unreachable_since or time.monotonic()
        if not await self._check_state(lost_if_missing=self._state_marked):
            for run_id in list(self.runs):
                await self._reclaim(run_id)
            for shard in list(self._unsent.values()):
                if shard.state == ShardState.DISPATCHED and shard.spec.run_id in self.runs:
                    await self._send_shard(shard)
        self._unsent.clear()
        log.warning("Redis reachable again after %.0f s", time.monotonic() - since)
        self._unreachable_since = None
        self._reachable_at = time.monotonic()

    async def _check_state(self, lost_if_missing: bool) -> bool:
        """True (after rebuilding) when Redis lost the state kept there: its marker is
        missing although it was there before (``lost_if_missing``)."""
        if await holds_state(self.redis):
            self._state_marked = True
            return False
        lost = lost_if_missing and bool(self.runs)
        if lost:
            await self._state_lost("Redis came back without its data")
        await mark_state(self.redis)
        self._state_marked = True
        return lost

    async def _state_lost(self, reason: str) -> None:
        """Re-create every run's consumer groups and re-dispatch each shard not settled
        in DuckDB as a new attempt (its streams, queued task and counters are gone)."""
        reason = f"Redis lost its state ({reason})"
        log.error("%s: re-creating consumer groups, re-dispatching unsettled shards", reason)
        for run_id, coordinator in list(self.runs.items()):
            await self._create_groups(run_id)
            if coordinator.cancel_deadline is not None:
                await self.redis.set(cancel_key(run_id), 1, ex=24 * 3600)
            if isinstance(coordinator, SessionCoordinator):
                # What the gateway and workers had put in Redis and was not stored yet
                # is gone (logged above); what follows must not be taken for it.
                await restore_batch_counters(self.redis, self.con, run_id)
            for shard in coordinator.shards.values():
                if shard.state in IN_FLIGHT:
                    coordinator.redispatch(shard, reason, self.settings.max_attempts)
        self._unsent.clear()
        await mark_state(self.redis)
        self._state_marked = True

    async def _watchdog(self, coordinator: Coordinator) -> None:
        """A run without progress for ``stall_timeout_s``: re-dispatch each stuck shard
        once, then fail it with the reason (a task still queued is waiting, not stuck)."""
        now = time.monotonic()
        stuck = coordinator.stalled(now, self.settings.stall_timeout_s)
        if not stuck:
            return
        quiet_s = now - coordinator.last_progress_at
        reason = f"no progress for {quiet_s:.0f} s ({env_name('control.stall_timeout_s')})"
        for shard in stuck:
            if shard.state == ShardState.DISPATCHED and await self._queued(shard):
                continue
            if shard.stall_redispatched:
                message = coordinator.missing(shard, f"{reason}, also after a re-dispatch")
                log.error(
                    "run %s: shard %s failed: %s", coordinator.run_id, shard.spec.shard_id, message
                )
                coordinator.fail(shard, message)
            else:
                log.warning(
                    "run %s: shard %s re-dispatched: %s",
                    coordinator.run_id,
                    shard.spec.shard_id,
                    reason,
                )
                shard.stall_redispatched = True
                coordinator.redispatch(shard, reason, self.settings.max_attempts)
        coordinator.last_progress_at = now  # the next verdict after another full timeout

    async def _queued(self, shard: ShardProgress) -> bool:
        spec = shard.spec
        try:
            return await task_queued(
                self.redis, region_queue(spec.region), shard_task_id(spec.run_id, spec.shard_id)
            )
        except UNREACHABLE_ERRORS:
            return False  # Redis away for the whole timeout: nothing is waiting there

    # ------------------------------------------------------------------ streams

    def _streams(self, run_id: str) -> tuple[str, ...]:
        streams: tuple[str, ...] = (events_stream(run_id), records_stream(run_id))
        if isinstance(self.runs.get(run_id), SessionCoordinator):
            streams += (captures_stream(run_id),)
        else:
            streams += (metrics_stream(run_id),)
        return streams

    async def _drain_metrics(self, run_id: str) -> None:
        """Store the scrapes still on a closing run's metrics stream: a shard publishes
        its last ones just before ``finished``, and a backlog read behind the events
        would otherwise be deleted with the stream."""
        stream = metrics_stream(run_id)
        while True:
            answer: Any = await self.redis.xreadgroup(
                GROUP, self.consumer, {stream: ">"}, count=MAX_DRAIN_ENTRIES
            )
            entries = answer[0][1] if answer else []
            if not entries:
                return
            await self._handle(stream, entries)

    async def _create_groups(self, run_id: str) -> None:
        for stream in self._streams(run_id):
            try:
                await self.redis.xgroup_create(stream, GROUP, id="0", mkstream=True)
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

    async def _reclaim(self, run_id: str) -> None:
        """Take over entries a previous control plane read but never acknowledged."""
        for stream in self._streams(run_id):
            start = "0-0"
            while True:
                answer: Any = await self.redis.xautoclaim(
                    stream, GROUP, self.consumer, min_idle_time=0, start_id=start, count=500
                )
                start, entries = answer[0], answer[1]
                live = [(i, f) for i, f in entries if f]  # deleted entries come back empty
                if live:
                    await self._handle(stream, live)
                if start in (b"0-0", "0-0") or not entries:
                    break

    async def _close_run(self, coordinator: Coordinator) -> None:
        """The run is settled in DuckDB: drop its streams from Redis. The done and cancel
        keys stay (they expire) so that a late redelivered task is still skipped."""
        if coordinator.run_id in self.records.runs():  # a cancelled run's last records
            await store_due(self.records, self.redis, GROUP, self.runs, force=True)
        if isinstance(coordinator, RunCoordinator):
            await self._drain_metrics(coordinator.run_id)
        streams = self._streams(coordinator.run_id)
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
        self.spec_parts.forget(run_id)
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


def _store_scrapes(con: duckdb.DuckDBPyConnection, payloads: list[bytes]) -> None:
    cursor = con.cursor()
    try:
        ingest_scrapes(cursor, payloads)
    finally:
        cursor.close()


def _dataset_content(cursor: duckdb.DuckDBPyConnection, dataset_id: str) -> bytes:
    try:
        return DatasetStore(cursor).content(dataset_id)
    finally:
        cursor.close()


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


async def live_worker_count(redis: Redis, region: str) -> int:
    """Number of workers of ``region`` with a current heartbeat."""
    return len([k async for k in redis.scan_iter(match=heartbeat_pattern(region), count=100)])
