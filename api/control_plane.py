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
import orjson
from celery import Celery
from redis.asyncio import Redis
from redis.exceptions import RedisError, ResponseError

from analytics.ingest import BatchMessage, ingest_batches
from analytics.runs import RunStore
from analytics.shadow import ensure_shadow_schema, ingest_captures, session_ids
from api.coordinator import RunCoordinator, SessionCoordinator, ShardProgress
from scenarios.gateway_config import GatewayConfig
from scenarios.model import Scenario
from scenarios.settings import ControlSettings
from scenarios.wire import (
    cancel_key,
    events_stream,
    heartbeat_key,
    heartbeat_pattern,
    owner_key,
    records_stream,
    region_queue,
    shard_task_id,
)
from workers.shadow import batch_seq_key, captures_stream
from workers.tasks import RUN_SHARD

log = logging.getLogger("tokenbench.control")

GROUP = "control"
READ_COUNT = 500
READ_BLOCK_MS = 200
HEALTH_CHECK_S = 1.0


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
        self.runs: dict[str, RunCoordinator] = {}
        self.consumer = f"control-{uuid.uuid4().hex[:8]}"
        self._no_worker_since: dict[str, float] = {}
        self._last_health_check = 0.0
        self._wake = asyncio.Event()

    # ------------------------------------------------------------------ runs

    async def start(self) -> list[str]:
        """Resume runs left running and reclaim their unacknowledged entries."""
        resumed = []
        ensure_shadow_schema(self.con)
        sessions = session_ids(self.con)
        for run_id in self.store.running_runs():
            coordinator = (
                SessionCoordinator.resume_session(run_id, self.store)
                if run_id in sessions
                else RunCoordinator.resume(run_id, self.store, self.settings.max_streams_per_shard)
            )
            self.runs[run_id] = coordinator
            await self._create_groups(run_id)
            await self._reclaim(run_id)
            resumed.append(run_id)
        return resumed

    async def submit(
        self, scenario: Scenario, run_id: str | None = None, wait_for_workers: bool = False
    ) -> RunCoordinator:
        """Create a run; its first stage is dispatched by the loop right away.
        ``wait_for_workers`` lets its shards wait for a region's first worker."""
        run_id = run_id or new_run_id()
        coordinator = RunCoordinator.create(
            run_id, scenario, self.store, self.settings.max_streams_per_shard
        )
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
        """One iteration: dispatch, consume, check workers, close completed runs."""
        for coordinator in list(self.runs.values()):
            await self._dispatch(coordinator)
        await self._consume()
        if time.monotonic() - self._last_health_check >= HEALTH_CHECK_S:
            self._last_health_check = time.monotonic()
            for coordinator in list(self.runs.values()):
                await self._check_workers(coordinator)
        for coordinator in list(self.runs.values()):
            if coordinator.cancel_deadline is not None and (
                coordinator.quiet or time.monotonic() >= coordinator.cancel_deadline
            ):
                coordinator.cancel_unsettled("run cancelled")
            if coordinator.complete:
                if coordinator.state == "running":
                    coordinator.finish()
                await self._close_run(coordinator)

    async def _dispatch(self, coordinator: RunCoordinator) -> None:
        if coordinator.cancel_deadline is not None:
            return
        for shard in coordinator.to_dispatch():
            coordinator.mark_dispatched(shard)
            await self._send(shard)

    async def _send(self, shard: ShardProgress) -> None:
        spec = shard.spec
        await asyncio.to_thread(
            self.celery.send_task,
            RUN_SHARD,
            args=[spec.model_dump(mode="json")],
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
            GROUP, self.consumer, streams, count=READ_COUNT, block=READ_BLOCK_MS
        )
        for stream, entries in answer or []:
            await self._handle(stream.decode() if isinstance(stream, bytes) else stream, entries)

    async def _handle(self, stream: str, entries: list[tuple[bytes, dict[bytes, bytes]]]) -> None:
        """Apply one stream's entries to its run, then acknowledge them."""
        run_id = stream.split(":")[2]
        coordinator = self.runs.get(run_id)
        if coordinator is not None and entries:
            if stream.endswith(":records"):
                messages = [
                    BatchMessage(
                        run_id=run_id,
                        shard_id=fields[b"shard_id"].decode(),
                        attempt=int(fields[b"attempt"]),
                        batch_seq=int(fields[b"batch_seq"]),
                        ipc=fields[b"ipc"],
                    )
                    for _, fields in entries
                ]
                result = ingest_batches(self.con, messages)
                coordinator.on_ingested(result.per_attempt, result.rows)
            elif stream.endswith(":captures"):
                rows = [row for _, fields in entries for row in orjson.loads(fields[b"rows"])]
                ingest_captures(self.con, rows)
            else:
                for _, fields in entries:
                    coordinator.on_event({k.decode(): v.decode() for k, v in fields.items()})
            coordinator.settle()
        if entries:
            ids = [entry_id for entry_id, _ in entries]
            await self.redis.xack(stream, GROUP, *ids)
            if stream.endswith(":records"):
                # Stored and committed: the payloads need not stay in Redis memory.
                await self.redis.xdel(stream, *ids)

    async def _check_workers(self, coordinator: RunCoordinator) -> None:
        now = time.monotonic()
        # A shard is lost when it went silent and its worker's heartbeat expired.
        silent = coordinator.silent_workers(self.settings.worker_lost_after_s)
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
            for spec in coordinator.stages[index].shards:
                shard = coordinator.shards[spec.shard_id]
                if spec.region == region and not shard.settled:
                    coordinator.fail(shard, f"no live worker in region {region!r}")

    # ------------------------------------------------------------------ streams

    def _streams(self, run_id: str) -> tuple[str, ...]:
        streams: tuple[str, ...] = (events_stream(run_id), records_stream(run_id))
        if isinstance(self.runs.get(run_id), SessionCoordinator):
            streams += (captures_stream(run_id),)
        return streams

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

    async def _close_run(self, coordinator: RunCoordinator) -> None:
        """The run is settled in DuckDB: drop its streams from Redis. The done and cancel
        keys stay (they expire) so that a late redelivered task is still skipped."""
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


async def live_worker_count(redis: Redis, region: str) -> int:
    """Number of workers of ``region`` with a current heartbeat."""
    return len([k async for k in redis.scan_iter(match=heartbeat_pattern(region), count=100)])
