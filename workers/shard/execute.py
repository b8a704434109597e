"""Executing one shard: a provider, in one region, at one load level of one stage.

Plain async code (no Celery here): resolve the endpoint, run the load shape (closed or
open loop, ``workers/load``), turn each result into a record, publish batches and
lifecycle events; ``shard_finished`` carries the stage window and the client's own
health figures (``workers/shard/health.py``, names in docs/load.md). Every request yields
exactly one record, failed or not; a shard that cannot start at all (e.g. its API key variable
is missing on this worker) reports ``shard_failed`` with a message instead of records.

Redis faults (docs/security.md, redis-faults): an execution claims its shard
(``workers/shard/ownership.py``) and publishes only while it holds the claim; while Redis is
unreachable it keeps its records and retries for ``redis_patience_s``, then stops the
shard and logs why. A worker that starts shutting down stops its shards' load, publishes
what they recorded and leaves them for the control plane to re-dispatch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable
from typing import TypeVar

from scenarios.datasets.files import FileEntry, WorkloadFileError
from scenarios.security.egress import EgressDenied, check_provider_egress
from scenarios.stages import load_kind
from scenarios.tokenizers.files import TokenizerUnavailable
from scenarios.wire.contract import (
    EventType,
    ShardSpec,
    attempts_key,
    cancel_key,
    done_key,
    stop_key,
)
from scenarios.workload.images import ImagesUnavailable
from workers.client.adapters import Adapter, AdapterContext, ProviderSetupError, build_adapter
from workers.client.prewarm import arrival_transport, prewarmed
from workers.client.result import RequestResult
from workers.load.session_plans import has_replayed_sessions
from workers.load.sessions import build_session_load
from workers.load.shapes import LoadShape, build_load, connections_needed, rate_figures
from workers.prompts.calibration import CalibratedPrompts, save_fit
from workers.prompts.dataset_requests import DatasetRows
from workers.prompts.datasets import dataset_cache
from workers.prompts.images import ImagePool, prepared_image_pool
from workers.prompts.makers import prompt_maker
from workers.prompts.plan import PlannedRequest, PromptMaker, request_planner
from workers.runtime.context import WorkerContext
from workers.runtime.event_loop import shutting_down
from workers.runtime.fd_budget import DESCRIPTORS, DescriptorBudgetExceeded
from workers.shard.cache_reset import reset_cache
from workers.shard.health import ShardHealth
from workers.shard.ownership import TRANSIENT_ERRORS, Claim, ClaimLost, RedisUnavailable, retrying
from workers.shard.progress import Progress
from workers.shard.publisher import ShardPublisher
from workers.shard.rows import RowContext, record_row, tagged, wall_ns
from workers.shard.telemetry import MetricsScraper

OWNER_TTL_S = 10.0
T = TypeVar("T")
DONE_TTL_S = 7 * 24 * 3600

log = logging.getLogger("tokenbench.worker")


async def execute_shard(spec: ShardSpec, context: WorkerContext) -> int:
    """Run the shard unless it is done or running elsewhere; publish its records and
    events; return the number of records (0 when skipped)."""
    redis = context.redis
    patience = context.settings.control.redis_patience_s
    name = f"shard {spec.run_id}/{spec.shard_id}"
    try:
        skip_keys = (done_key(spec.run_id, spec.shard_id), cancel_key(spec.run_id))
        if await retrying(lambda: redis.exists(*skip_keys), patience, f"starting {name}"):
            return 0  # a late duplicate delivery of a finished shard, or a cancelled run
        claim = Claim(redis, spec.run_id, spec.shard_id, context.worker_name, OWNER_TTL_S)
        if not await retrying(claim.acquire, patience, f"claiming {name}"):
            return 0  # another live worker is executing it (duplicate delivery)
        try:
            return await _execute_owned(spec, context, claim)
        finally:
            with contextlib.suppress(*TRANSIENT_ERRORS):  # else the owner key expires
                await claim.release()
    except ClaimLost as exc:
        # Superseded: the control plane re-dispatched the shard as a new attempt.
        log.warning("%s stopped: %s", name, exc)
    except RedisUnavailable as exc:
        # Nothing more can be published; the control plane's watchdog re-dispatches the
        # shard as a new attempt or fails it with the reason.
        log.error("%s stopped, its unpublished records are lost: %s", name, exc)
    return 0


def _publisher(
    spec: ShardSpec, context: WorkerContext, claim: Claim, attempt: int
) -> ShardPublisher:
    publish = context.settings.publish
    return ShardPublisher(
        context.redis,
        spec.run_id,
        spec.shard_id,
        attempt,
        publish.batch_rows,
        publish.batch_interval_s,
        claim=claim,
        patience_s=context.settings.control.redis_patience_s,
    )


def _row_context(spec: ShardSpec, context: WorkerContext, attempt: int) -> RowContext:
    """What every record of this attempt shares."""
    return RowContext(
        run_id=spec.run_id,
        stage=spec.stage,
        shard_id=spec.shard_id,
        attempt=attempt,
        provider=spec.provider.name,
        model=spec.provider.model,
        region=context.region,
        worker=context.worker_name,
        load_kind=load_kind(spec),
        concurrency=spec.concurrency,
        tag_requests=spec.tag_requests,
    )


async def _execute_owned(spec: ShardSpec, context: WorkerContext, claim: Claim) -> int:
    redis = context.redis
    patience = context.settings.control.redis_patience_s
    attempts = attempts_key(spec.run_id, spec.shard_id)
    attempt = int(await retrying(lambda: redis.incr(attempts), patience, "counting attempts"))
    publisher = _publisher(spec, context, claim, attempt)
    await publisher.event(EventType.STARTED, worker=context.worker_name, region=context.region)
    try:
        # Checked again here, after DNS, on the machine that will connect, so that a
        # refused endpoint fails the shard with its reason; the HTTP client's egress
        # guard still checks every connection at the address it connects to.
        await asyncio.to_thread(check_provider_egress, spec.provider, context.settings.egress, True)
    except (EgressDenied, OSError) as exc:
        await publisher.event(EventType.FAILED, message=str(exc))
        return 0
    # A shard this process cannot serve within its descriptors is refused now, with
    # its need and the budget, rather than failing it and later shards with EMFILE.
    pool = arrival_transport(context.http)
    try:
        held = DESCRIPTORS.claim(connections_needed(spec), pool.open_connections if pool else 0)
    except DescriptorBudgetExceeded as exc:
        log.warning("shard %s/%s refused: %s", spec.run_id, spec.shard_id, exc)
        await publisher.event(EventType.FAILED, message=str(exc))
        return 0
    # The shard holds its simulated endpoint (if any) until it ends: the worker stops an
    # endpoint only when no shard holds it (workers/simulator/pool.py).
    with held:
        async with contextlib.AsyncExitStack() as lease:
            try:
                adapter_context = await lease.enter_async_context(
                    context.adapter_lease(spec.provider)
                )
                adapter = await build_adapter(spec.provider, adapter_context)
            except (ProviderSetupError, EgressDenied, RuntimeError, OSError) as exc:
                await publisher.event(EventType.FAILED, message=str(exc))
                return 0
            return await _run_shard(
                spec, context, claim, publisher, adapter, adapter_context, attempt
            )


async def _run_shard(
    spec: ShardSpec,
    context: WorkerContext,
    claim: Claim,
    publisher: ShardPublisher,
    adapter: Adapter,
    adapter_context: AdapterContext,
    attempt: int,
) -> int:
    """The shard's load, run and published, its adapter built (its simulated endpoint
    leased) and its connections within the budget."""
    rows = _row_context(spec, context, attempt)
    prepared = await _prepare_load(spec, context, claim, publisher)
    if prepared is None:
        return 0
    maker, load = prepared
    # Before the stage clock: the stage's first requests find an empty prefix cache.
    await reset_cache(spec, context, publisher, adapter_context.endpoint)
    progress = Progress()
    health = ShardHealth(longest_request_s=spec.provider.timeout_s)
    calibration = maker if isinstance(maker, CalibratedPrompts) else None

    async def send(request: PlannedRequest, intended_start: int) -> RequestResult:
        return await adapter.measure(context.http, tagged(rows, request), intended_start)

    def record(request: PlannedRequest, result: RequestResult) -> None:
        progress.add(result)
        health.add(result)
        publisher.add(record_row(rows, request, result))
        if calibration is not None:
            calibration.observe_answer(request, result)

    # Server telemetry around the load, if the planner marked this shard (docs/telemetry.md).
    scraper = MetricsScraper.for_shard(spec, context, attempt, claim, adapter_context.endpoint)
    broken: TokenizerUnavailable | None = None
    async with publisher, scraper or contextlib.nullcontext():
        # Stopped by an event, not task.cancel(): a cancellation landing inside a Redis
        # call can be swallowed by the client library and leave the task running.
        stop_reporting = asyncio.Event()
        reporter = asyncio.create_task(
            _report_progress(spec, context, publisher, load, progress, stop_reporting, claim)
        )
        try:
            # Before the stage clock (load.run) and the health window start: recorded.
            warm_url = adapter_context.endpoint or next(iter(spec.provider.endpoint_urls()), None)
            async with prewarmed(
                context.http,
                warm_url,
                connections_needed(spec),
                connect_timeout_s=spec.provider.connect_timeout_s,
                warm=context.settings.worker.prewarm,
            ) as warmed:
                health.prewarmed = warmed
                await _stop_if_told(spec, context, load)
                async with health:
                    try:
                        await load.run(send, record)
                    except TokenizerUnavailable as exc:
                        # The workload's tokenizer failed on a prompt it was making (it
                        # passed its probe): the shard fails with the reason, published
                        # with what it recorded, rather than escaping as a crash.
                        broken = exc
        finally:
            stop_reporting.set()
            stopped = await reporter
        if isinstance(stopped, Exception):
            raise stopped  # claim lost or Redis gone: the publisher flushes nothing more
    if broken is not None:
        await publisher.event(EventType.FAILED, message=str(broken))
        return publisher.records_published
    if stopped == _SHUTDOWN:
        # Published what it recorded (kept as this attempt's records); no `finished`: the
        # control plane sees the worker gone and runs the shard again as a new attempt.
        log.warning(
            "shard %s/%s stopped by worker shutdown after %d requests; published",
            spec.run_id, spec.shard_id, publisher.records_published,
        )  # fmt: skip
        return publisher.records_published
    if calibration is not None:  # the next stage starts calibrated
        await _keep_calibration(spec, context, calibration)
    await _finish(spec, context, attempt, publisher, load, progress, health)
    return publisher.records_published


async def _finish(
    spec: ShardSpec,
    context: WorkerContext,
    attempt: int,
    publisher: ShardPublisher,
    load: LoadShape,
    progress: Progress,
    health: ShardHealth,
) -> None:
    """Mark the attempt done, then publish its last progress and its `finished` event."""
    done = done_key(spec.run_id, spec.shard_id)
    await retrying(
        lambda: context.redis.set(done, attempt, ex=DONE_TTL_S),
        context.settings.control.redis_patience_s,
        "finishing",
    )
    # The last progress, so that the live view's figures cover every request of the shard.
    await publisher.event(EventType.PROGRESS, **_progress_fields(load, progress))
    await publisher.event(
        EventType.FINISHED,
        records=publisher.records_published,
        batches=publisher.batches_published,
        errors=progress.errors,
        cancelled=int(load.stopped),
        load_kind=load.kind,
        **stage_window(load, spec.warmup_s, spec.cooldown_s),
        **health.summary(**rate_figures(load, _target_rps(spec))),
    )


async def _prepare_load(
    spec: ShardSpec, context: WorkerContext, claim: Claim, publisher: ShardPublisher
) -> tuple[PromptMaker, LoadShape] | None:
    """The shard's prompt maker and load, its inputs loaded; None (the shard failed,
    with the reason published) when an input cannot be had."""
    try:
        # Loading a dataset and counting its rows may outlast the claim's TTL: keep it.
        entries, maker, kept = await _holding(claim, _workload_inputs(spec, context))
        images = await _image_pool(spec)
        return maker, _load(spec, entries, maker, kept, images)
    except (WorkloadFileError, TokenizerUnavailable, ImagesUnavailable) as exc:
        await publisher.event(EventType.FAILED, message=str(exc))
        return None


def _load(
    spec: ShardSpec,
    entries: tuple[FileEntry, ...] | None,
    maker: PromptMaker,
    kept: DatasetRows | None,
    images: ImagePool | None,
) -> LoadShape:
    """The shard's load: sessions (generated, or a replayed session log), else requests
    (``kept``: ``workload.dataset``'s rows, already counted and filtered; ``images``: the
    run's image pool, made before the stage clock)."""
    load: LoadShape
    if spec.workload.sessions is not None or has_replayed_sessions(spec.workload, entries):
        load = build_session_load(spec, entries or (), maker)
    else:
        plan = request_planner(
            spec.workload, spec.seed, spec.stage, entries, maker, kept, images=images
        )
        load = build_load(spec, plan, entries or ())
    # The steady part's bounds, so its count is kept as the stage runs (stage_window).
    load.intended.set_window(spec.warmup_s, spec.cooldown_s)
    return load


async def _workload_inputs(
    spec: ShardSpec, context: WorkerContext
) -> tuple[tuple[FileEntry, ...] | None, PromptMaker, DatasetRows | None]:
    """The workload's dataset entries, the shard's prompt maker and, for
    ``workload.dataset``, the rows it keeps (counted with the maker)."""
    max_bytes = context.settings.api.max_dataset_bytes
    entries = await dataset_cache.workload_entries(context.redis, spec.workload, max_bytes)
    maker = await prompt_maker(
        context.redis, spec.workload, spec.run_id, spec.provider.name, context.region, max_bytes
    )
    kept = await dataset_cache.workload_rows(spec.workload, entries, maker)
    return entries, maker, kept


async def _holding(claim: Claim, work: Awaitable[T]) -> T:
    """``await work`` while keeping the claim on the shard (ClaimLost if it is lost)."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=OWNER_TTL_S / 3)
            if done:
                return task.result()
            try:
                kept = await claim.keep()
            except TRANSIENT_ERRORS:
                continue  # Redis away for a moment: the loading goes on, kept next round
            if not kept:
                raise ClaimLost("the claim on the shard was lost while its inputs were loaded")
    finally:
        task.cancel()


async def _image_pool(spec: ShardSpec) -> ImagePool | None:
    """The run's images, generated off the event loop before the stage clock starts, so
    that encoding never lands inside a measured request (docs/workloads.md)."""
    images = spec.workload.images
    if images is None or images.fraction == 0:
        return None
    try:
        return await prepared_image_pool(images, spec.seed)
    except (OSError, ValueError) as exc:  # e.g. a Pillow built without the format's codec
        raise ImagesUnavailable(f"workload.images: cannot generate the images: {exc}") from exc


async def _keep_calibration(
    spec: ShardSpec, context: WorkerContext, calibration: CalibratedPrompts
) -> None:
    await retrying(
        lambda: save_fit(
            context.redis, spec.run_id, spec.provider.name, context.region, calibration.fit
        ),
        context.settings.control.redis_patience_s,
        "keeping the prompt calibration",
    )


def stage_window(load: LoadShape, warmup_s: float, cooldown_s: float) -> dict[str, int]:
    """The stage window and its steady part as wall-clock epoch ns (the records' ``*_at``
    clock), and how many sent requests were intended to start inside the steady part.

    A record is steady state when ``steady_start_at <= intended_start_at <
    steady_end_at``; warm-up and cool-down requests are kept but excluded from it.
    """
    start, end = load.start_ns, load.planned_end_ns()
    steady_start = start + round(warmup_s * 1e9)
    steady_end = max(steady_start, end - round(cooldown_s * 1e9))
    steady = load.intended.steady(steady_start, steady_end)
    return {
        "window_start_at": wall_ns(start) or 0,
        "steady_start_at": wall_ns(steady_start) or 0,
        "steady_end_at": wall_ns(steady_end) or 0,
        "window_end_at": wall_ns(end) or 0,
        "steady_requests": steady,
    }


def _target_rps(spec: ShardSpec) -> float | None:
    """This part's share of the stage's rate (open loop)."""
    return None if spec.rate is None else spec.rate.rps / spec.rate.parts


_SHUTDOWN = "worker shutdown"


async def _report_progress(
    spec: ShardSpec,
    context: WorkerContext,
    publisher: ShardPublisher,
    load: LoadShape,
    progress: Progress,
    stop: asyncio.Event,
    claim: Claim,
) -> Exception | str | None:
    """Publish progress and keep the claim periodically; stop issuing requests once the
    run is cancelled. Returns why it stopped the load early, if it did: the worker is
    shutting down, the claim was lost, or Redis stayed unreachable for too long."""
    patience = context.settings.control.redis_patience_s
    unreachable_since: float | None = None
    while not await _wait(stop, context.settings.publish.progress_interval_s):
        if shutting_down.is_set():
            load.stop()
            return _SHUTDOWN
        try:
            if not await claim.keep():
                raise ClaimLost(f"attempt {publisher.attempt} lost its claim on the shard")
            if await _told_to_stop(spec, context):
                load.stop()
            await publisher.try_event(EventType.PROGRESS, **_progress_fields(load, progress))
            unreachable_since = None
        except ClaimLost as exc:
            load.stop()
            return exc
        except TRANSIENT_ERRORS as exc:
            # Requests go on and records stay buffered while Redis is away, for a while.
            now = time.monotonic()
            unreachable_since = unreachable_since or now
            if now - unreachable_since > patience:
                load.stop()
                return RedisUnavailable(f"Redis unreachable for {patience:.0f} s: {exc}")
    return None


async def _stop_if_told(spec: ShardSpec, context: WorkerContext, load: LoadShape) -> None:
    """A shard whose stage ended early before it began (docs/answers.md) sends nothing
    and finishes normally."""
    patience = context.settings.control.redis_patience_s
    if await retrying(lambda: _told_to_stop(spec, context), patience, "starting the load"):
        load.stop()


async def _told_to_stop(spec: ShardSpec, context: WorkerContext) -> bool:
    """The run was cancelled, or the control plane ended this shard's stage early
    (docs/answers.md): one round trip for both keys."""
    keys = (cancel_key(spec.run_id), stop_key(spec.run_id, spec.shard_id))
    return bool(await context.redis.exists(*keys))


def _progress_fields(load: LoadShape, progress: Progress) -> dict[str, int | float]:
    """A progress event's figures: seconds since the stage clock started, requests sent
    and ended (their difference is what is in flight, which the control plane's
    saturation check follows: docs/answers.md), errors, TTFT p50."""
    elapsed = (time.perf_counter_ns() - load.start_ns) / 1e9 if load.start_ns else 0.0
    return {
        "elapsed_s": round(elapsed, 3),
        "sent": len(load.intended),
        "done": progress.done,
        "errors": progress.errors,
        "ttft_p50_ms": progress.ttft_p50(),
    }


async def _wait(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait for ``event`` at most ``timeout_s``; True if it is set."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), timeout_s)
    return event.is_set()
