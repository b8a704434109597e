"""Executing one shard: a provider, in one region, at one load level of one stage.

Plain async code (no Celery here): resolve the endpoint, run the closed loop, turn each
result into a record, publish batches and lifecycle events. Every request yields exactly
one record, failed or not; a shard that cannot start at all (e.g. its API key variable
is missing on this worker) reports ``shard_failed`` with a message instead of records.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
from dataclasses import dataclass, field

from scenarios.wire import EventType, ShardSpec, attempts_key, cancel_key
from workers.client.adapters import ProviderSetupError, build_adapter
from workers.client.result import RequestResult
from workers.context import WorkerContext
from workers.executor import RequestSource, run_closed_loop
from workers.prompts import PlannedRequest, plan_request
from workers.publisher import ShardPublisher
from workers.rows import RowContext, record_row


@dataclass
class _Progress:
    done: int = 0
    errors: int = 0
    recent_ttft_ms: list[float] = field(default_factory=list)

    def add(self, result: RequestResult) -> None:
        self.done += 1
        if result.failure is not None:
            self.errors += 1
        elif result.first_token is not None:
            self.recent_ttft_ms.append((result.first_token - result.sent) / 1e6)

    def ttft_p50(self) -> float:
        window, self.recent_ttft_ms = self.recent_ttft_ms, []
        return round(statistics.median(window), 3) if window else -1.0


async def execute_shard(spec: ShardSpec, context: WorkerContext) -> int:
    """Run the shard, publish its records and events; return the number of records."""
    redis = context.redis
    attempt = int(await redis.incr(attempts_key(spec.run_id, spec.shard_id)))
    publish = context.settings.publish
    publisher = ShardPublisher(
        redis, spec.run_id, spec.shard_id, attempt, publish.batch_rows, publish.batch_interval_s
    )
    await publisher.event(EventType.STARTED, worker=context.worker_name, region=context.region)
    try:
        adapter = await build_adapter(spec.provider, context)
    except (ProviderSetupError, RuntimeError, OSError) as exc:
        await publisher.event(EventType.FAILED, message=str(exc))
        return 0

    rows = RowContext(
        run_id=spec.run_id,
        stage=spec.stage,
        shard_id=spec.shard_id,
        attempt=attempt,
        provider=spec.provider.name,
        model=spec.provider.model,
        region=context.region,
        worker=context.worker_name,
        load_kind="closed",
        concurrency=spec.concurrency,
    )
    source = RequestSource(
        lambda seq: plan_request(spec.workload, spec.seed, spec.stage, seq),
        spec.seq_start,
        spec.requests,
        spec.duration_s,
    )
    progress = _Progress()

    async def send(request: PlannedRequest, intended_start: int) -> RequestResult:
        return await adapter.measure(context.http, request, intended_start)

    def record(request: PlannedRequest, result: RequestResult) -> None:
        progress.add(result)
        publisher.add(record_row(rows, request, result))

    async with publisher:
        # Stopped by an event, not task.cancel(): a cancellation landing inside a Redis
        # call can be swallowed by the client library and leave the task running.
        stop_reporting = asyncio.Event()
        reporter = asyncio.create_task(
            _report_progress(spec, context, publisher, source, progress, stop_reporting)
        )
        try:
            await run_closed_loop(spec.concurrency, source, send, record)
        finally:
            stop_reporting.set()
            await reporter
    await publisher.event(
        EventType.FINISHED,
        records=publisher.records_published,
        batches=publisher.batches_published,
        errors=progress.errors,
        cancelled=int(source.stopped),
    )
    return publisher.records_published


async def _report_progress(
    spec: ShardSpec,
    context: WorkerContext,
    publisher: ShardPublisher,
    source: RequestSource,
    progress: _Progress,
    stop: asyncio.Event,
) -> None:
    """Publish progress periodically; stop issuing requests once the run is cancelled."""
    while not await _wait(stop, context.settings.publish.progress_interval_s):
        if await context.redis.exists(cancel_key(spec.run_id)):
            source.stop()
        await publisher.event(
            EventType.PROGRESS,
            done=progress.done,
            errors=progress.errors,
            ttft_p50_ms=progress.ttft_p50(),
        )


async def _wait(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait for ``event`` at most ``timeout_s``; True if it is set."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), timeout_s)
    return event.is_set()
