"""Driving a run: dispatch each stage's shards, consume events and records, settle state.

Event-driven: workers publish lifecycle events and Arrow record batches on the run's
Redis Streams; the coordinator reads both with one consumer group, appends batches to
DuckDB (acknowledging entries only after the commit) and advances to the next stage
when every shard of the current one is settled: finished with all its batches
ingested, or failed. No Celery result backend or chord is involved.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import duckdb
from celery import Celery
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from analytics.ingest import BatchMessage, ingest_batches
from analytics.runs import PlannedShard, RunStore
from api.planner import Stage, plan_run
from scenarios.model import Scenario
from scenarios.wire import (
    EventType,
    ShardSpec,
    cancel_key,
    events_stream,
    heartbeat_pattern,
    records_stream,
    region_queue,
)
from workers.tasks import RUN_SHARD

GROUP = "control"
READ_COUNT = 500
READ_BLOCK_MS = 250
# A region with pending shards and no live worker for this long fails those shards.
NO_WORKER_GRACE_S = 30.0


def new_run_id() -> str:
    """A sortable, unique run id."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


@dataclass
class ShardProgress:
    """What the coordinator knows of one shard."""

    spec: ShardSpec
    state: str = "planned"  # planned | running | finished | failed | cancelled
    attempt: int | None = None
    finished_attempt: int | None = None
    expected_batches: int | None = None
    ingested: dict[int, int] = field(default_factory=dict)  # attempt -> batches stored
    done: int = 0
    errors: int = 0
    ttft_p50_ms: float | None = None
    message: str | None = None

    @property
    def settled(self) -> bool:
        """True once nothing more is expected for this shard."""
        return self.state in ("finished", "failed", "cancelled")

    @property
    def planned(self) -> int | None:
        """Requests the shard plans to send, when fixed by count."""
        return self.spec.requests


ProgressCallback = Callable[["RunCoordinator"], None]


class RunCoordinator:
    """Runs one scenario to completion against live workers."""

    def __init__(
        self,
        scenario: Scenario,
        redis: Redis,
        con: duckdb.DuckDBPyConnection,
        celery: Celery,
        run_id: str | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> None:
        self.scenario = scenario
        self.redis = redis
        self.con = con
        self.store = RunStore(con)
        self.celery = celery
        self.run_id = run_id or new_run_id()
        self.stages: list[Stage] = plan_run(self.run_id, scenario)
        self.shards: dict[str, ShardProgress] = {
            spec.shard_id: ShardProgress(spec) for stage in self.stages for spec in stage.shards
        }
        self.current_stage = 0
        self.records_ingested = 0
        self.on_progress = on_progress
        self._consumer = f"coordinator-{uuid.uuid4().hex[:8]}"
        self._no_worker_since: dict[str, float] = {}

    # ------------------------------------------------------------------ lifecycle

    async def execute(self) -> str:
        """Run every stage in order; return the run's final state."""
        self.store.create_run(
            self.run_id,
            self.scenario,
            [
                PlannedShard(
                    s.shard_id, s.stage, s.provider.name, s.region, s.concurrency, s.requests
                )
                for stage in self.stages
                for s in stage.shards
            ],
        )
        await self._create_groups()
        try:
            for stage in self.stages:
                self.current_stage = stage.index
                await self._dispatch(stage)
                await self._pump_until(stage)
        except (asyncio.CancelledError, KeyboardInterrupt):
            await self.cancel()
            raise
        state = "finished" if all(s.state == "finished" for s in self.shards.values()) else "failed"
        self.store.finish_run(self.run_id, state)
        await self._cleanup_streams()
        return state

    async def cancel(self, drain_s: float = 10.0) -> None:
        """Tell workers to stop, store what already arrived, settle the run as cancelled."""
        await self.redis.set(cancel_key(self.run_id), 1, ex=24 * 3600)
        deadline = time.monotonic() + drain_s
        pending = [s for s in self.shards.values() if s.state == "running"]
        while time.monotonic() < deadline and not all(s.settled for s in pending):
            await self._pump_once()
        for shard in self.shards.values():
            if not shard.settled:
                shard.state = "cancelled"
                self.store.shard_done(
                    self.run_id, shard.spec.shard_id, "cancelled", shard.attempt, "run cancelled"
                )
        self.store.finish_run(self.run_id, "cancelled")

    # ------------------------------------------------------------------ dispatch

    async def _create_groups(self) -> None:
        for stream in (events_stream(self.run_id), records_stream(self.run_id)):
            try:
                await self.redis.xgroup_create(stream, GROUP, id="0", mkstream=True)
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

    async def _dispatch(self, stage: Stage) -> None:
        for spec in stage.shards:
            await asyncio.to_thread(
                self.celery.send_task,
                RUN_SHARD,
                args=[spec.model_dump(mode="json")],
                queue=region_queue(spec.region),
            )
        self._notify()

    # ------------------------------------------------------------------ consuming

    def _stage_settled(self, stage: Stage) -> bool:
        return all(self.shards[s.shard_id].settled for s in stage.shards)

    async def _pump_until(self, stage: Stage) -> None:
        while not self._stage_settled(stage):
            await self._pump_once()
            await self._check_workers()

    async def _pump_once(self) -> None:
        answer: Any = await self.redis.xreadgroup(
            GROUP,
            self._consumer,
            {events_stream(self.run_id): ">", records_stream(self.run_id): ">"},
            count=READ_COUNT,
            block=READ_BLOCK_MS,
        )
        events: list[tuple[bytes, dict[bytes, bytes]]] = []
        batches: list[tuple[bytes, dict[bytes, bytes]]] = []
        for stream, entries in answer or []:
            name = stream.decode() if isinstance(stream, bytes) else stream
            (events if name.endswith(":events") else batches).extend(entries)
        if batches:
            self._ingest(batches)
            await self.redis.xack(records_stream(self.run_id), GROUP, *[i for i, _ in batches])
        for _, fields in events:
            self._on_event({k.decode(): v.decode() for k, v in fields.items()})
        if events:
            await self.redis.xack(events_stream(self.run_id), GROUP, *[i for i, _ in events])
        if events or batches:
            self._settle_finished()
            self._notify()

    def _ingest(self, entries: list[tuple[bytes, dict[bytes, bytes]]]) -> None:
        messages = [
            BatchMessage(
                run_id=self.run_id,
                shard_id=fields[b"shard_id"].decode(),
                attempt=int(fields[b"attempt"]),
                batch_seq=int(fields[b"batch_seq"]),
                ipc=fields[b"ipc"],
            )
            for _, fields in entries
        ]
        result = ingest_batches(self.con, messages)
        self.records_ingested += result.rows
        for (shard_id, attempt), count in result.per_attempt.items():
            shard = self.shards.get(shard_id)
            if shard is not None:
                shard.ingested[attempt] = shard.ingested.get(attempt, 0) + count

    def _on_event(self, event: dict[str, str]) -> None:
        shard = self.shards.get(event.get("shard_id", ""))
        if shard is None or shard.settled:
            return  # an event of another run, or a late duplicate of a settled shard
        attempt = int(event["attempt"])
        kind = event["type"]
        if kind == EventType.STARTED:
            shard.state, shard.attempt = "running", attempt
            shard.done = shard.errors = 0
            self.store.attempt_started(self.run_id, shard.spec.shard_id, attempt, event["worker"])
        elif attempt != shard.attempt:
            return  # from an attempt that another one superseded
        elif kind == EventType.PROGRESS:
            shard.done, shard.errors = int(event["done"]), int(event["errors"])
            ttft = float(event["ttft_p50_ms"])
            shard.ttft_p50_ms = ttft if ttft >= 0 else shard.ttft_p50_ms
        elif kind == EventType.FINISHED:
            shard.finished_attempt, shard.expected_batches = attempt, int(event["batches"])
            shard.done, shard.errors = int(event["records"]), int(event["errors"])
            self.store.attempt_ended(
                self.run_id,
                shard.spec.shard_id,
                attempt,
                "finished",
                int(event["records"]),
                int(event["batches"]),
                None,
            )
        elif kind == EventType.FAILED:
            shard.state, shard.message = "failed", event.get("message", "shard failed")
            self.store.attempt_ended(
                self.run_id, shard.spec.shard_id, attempt, "failed", 0, 0, shard.message
            )
            self.store.shard_done(
                self.run_id, shard.spec.shard_id, "failed", attempt, shard.message
            )

    def _settle_finished(self) -> None:
        """A finished shard is settled once every batch it announced is stored."""
        for shard in self.shards.values():
            attempt = shard.finished_attempt
            if shard.settled or attempt is None or shard.expected_batches is None:
                continue
            if shard.ingested.get(attempt, 0) >= shard.expected_batches:
                shard.state = "finished"
                self.store.shard_done(self.run_id, shard.spec.shard_id, "finished", attempt, None)

    async def _check_workers(self) -> None:
        """Fail the pending shards of a region that has had no live worker for a while."""
        now = time.monotonic()
        pending_regions = {
            s.spec.region
            for s in self.shards.values()
            if s.spec.stage == self.current_stage and not s.settled
        }
        for region in pending_regions:
            if await live_worker_count(self.redis, region) > 0:
                self._no_worker_since.pop(region, None)
                continue
            since = self._no_worker_since.setdefault(region, now)
            if now - since < NO_WORKER_GRACE_S:
                continue
            for shard in self.shards.values():
                if shard.spec.region == region and not shard.settled:
                    shard.state = "failed"
                    shard.message = f"no live worker in region {region!r}"
                    self.store.shard_done(
                        self.run_id, shard.spec.shard_id, "failed", shard.attempt, shard.message
                    )
            self._notify()

    async def _cleanup_streams(self) -> None:
        """Everything is in DuckDB: drop the run's streams and keys from Redis."""
        keys = [events_stream(self.run_id), records_stream(self.run_id), cancel_key(self.run_id)]
        keys += [k async for k in self.redis.scan_iter(match=f"tokenbench:run:{self.run_id}:*")]
        await self.redis.delete(*set(keys))

    def _notify(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self)


async def live_worker_count(redis: Redis, region: str) -> int:
    """Number of workers of ``region`` with a current heartbeat."""
    return len([k async for k in redis.scan_iter(match=heartbeat_pattern(region), count=100)])
