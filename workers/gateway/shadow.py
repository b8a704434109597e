"""Shadow traffic on the worker side: send sampled live requests to each shadow provider.

The gateway (``workers/gateway``) sends sampled requests in batches
(:class:`ShadowBatch`: the session, its shadow providers, then the samples) to the
Celery queue of each region it mirrors to. A worker executes a batch here, as plain
async code: the batch's samples start together, every shadow provider of a sample gets
the same chat messages concurrently, through the provider's own adapter and key (read
from this worker's environment), and each result becomes one record carrying the
primary's ``request_key``, so that the comparison can pair them (docs/shadow.md). A
sample is sent its arrival offset after the batch's first (the gaps between live
requests are kept: a batch is not a burst), and its records are published as soon as
its providers answered, not when the whole batch is done. A single :class:`ShadowTask`
(what gateways sent before batches) is run as a batch of one.

Records of a shadow session are published per (session, shard id) with a batch number
drawn from a Redis counter rather than counted per process: many gateway and worker
processes publish under the same shard id for as long as the session lasts, and the
control plane's exactly-once key (run, shard, attempt, batch) must stay unique among
all of them. Every session record has attempt 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import orjson
from redis.asyncio import Redis

from scenarios.security.egress import EgressDenied, check_provider_egress
from scenarios.wire.contract import (
    DEFAULT_MAX_TOKENS,
    SESSION_ATTEMPT,
    STREAM_MAXLEN,
    RecordBatch,
    ShadowBatch,
    ShadowTask,
    batch_seq_key,
    cancel_key,
    records_stream,
    shadow_shard_id,
)
from workers.client.adapters import Adapter, ProviderSetupError, build_adapter
from workers.client.adapters.openai_chat import ChatParser
from workers.client.adapters.post_stream import PostStreamAdapter
from workers.client.errors import ErrorClass, RequestFailure, redact
from workers.client.result import RequestResult
from workers.client.streaming import HttpCall, measure_request
from workers.load.open_loop import sleep_until
from workers.prompts.plan import PlannedRequest, estimate_tokens
from workers.runtime.context import WorkerContext
from workers.shard.rows import RowContext, record_row

log = logging.getLogger("tokenbench.shadow")


async def publish_rows(
    redis: Redis, run_id: str, shard_id: str, rows: list[dict[str, object]]
) -> None:
    """Publish ``rows`` as one Arrow batch of a session shard (no-op when empty); the
    shadow tasks here and the gateway's sink both publish through it."""
    if not rows:
        return
    seq = int(await redis.incr(batch_seq_key(run_id, shard_id)))
    batch = RecordBatch.of_rows(shard_id, SESSION_ATTEMPT, seq, rows)
    await redis.xadd(records_stream(run_id), batch.fields(), maxlen=STREAM_MAXLEN, approximate=True)


def shadow_body(model: str, task: ShadowTask) -> bytes:
    """The streaming chat request a shadow receives: the client's messages and sampling
    parameters, the shadow's own model, usage requested."""
    body: dict[str, Any] = {
        "model": model,
        "messages": task.messages,
        **task.params,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if task.max_tokens is not None:
        body["max_tokens"] = task.max_tokens
    return orjson.dumps(body)


def flat_messages(messages: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    """(role, text) pairs of chat messages; multi-part content keeps its text parts."""
    pairs = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(
                str(part.get("text", "")) for part in content if isinstance(part, dict)
            )
        pairs.append((str(message.get("role", "user")), str(content or "")))
    return tuple(pairs)


async def execute_shadow_batch(batch: ShadowBatch, context: WorkerContext) -> int:
    """Send every sample of ``batch`` to every shadow provider, the samples concurrently;
    publish one record per sample and provider. Returns the number of records (0 when
    the session has been stopped)."""
    if await context.redis.exists(cancel_key(batch.run_id)):
        return 0  # the session was stopped: do not spend shadow capacity on it
    started = time.perf_counter_ns()
    published = await asyncio.gather(
        *(
            _execute(task, context, started + round(sample.offset_ms * 1e6))
            for sample, task in zip(batch.samples, batch.tasks(), strict=True)
        )
    )
    return sum(published)


async def execute_shadow(task: ShadowTask, context: WorkerContext) -> int:
    """One sample alone (a batch of one); returns the number of records."""
    return await execute_shadow_batch(ShadowBatch.of_task(task), context)


async def _execute(task: ShadowTask, context: WorkerContext, intended_start: int) -> int:
    """Send ``task`` at ``intended_start`` (a ``perf_counter_ns`` instant; a late start
    shows as schedule lag) to its providers; publish their records."""
    await sleep_until(intended_start)
    results = await asyncio.gather(
        *(_measure(provider, task, context, intended_start) for provider in task.providers)
    )
    planned = PlannedRequest(task.seq, task.prompt_tokens, task.max_tokens or 0, "")
    published = 0
    for provider, result in zip(task.providers, results, strict=True):
        shard_id = shadow_shard_id(provider.name, context.region)
        row = record_row(
            RowContext(
                run_id=task.run_id,
                stage=0,
                shard_id=shard_id,
                attempt=SESSION_ATTEMPT,
                provider=provider.name,
                model=provider.model,
                region=context.region,
                worker=context.worker_name,
                load_kind="shadow",
                concurrency=0,
                request_key=task.request_key,
            ),
            planned,
            result,
        )
        await publish_rows(context.redis, task.run_id, shard_id, [row])
        published += 1
    return published


async def _measure(
    provider: Any, task: ShadowTask, context: WorkerContext, intended_start: int
) -> RequestResult:
    # A simulated shadow's endpoint is held while its request runs (workers/simulator/pool.py).
    async with contextlib.AsyncExitStack() as held:
        try:
            # Checked on the machine that connects, after DNS, as for shards.
            await asyncio.to_thread(check_provider_egress, provider, context.settings.egress, True)
            adapter_context = await held.enter_async_context(context.adapter_lease(provider))
            adapter = await build_adapter(provider, adapter_context)
        except (ProviderSetupError, EgressDenied, RuntimeError, OSError) as exc:
            # The request could not be sent at all; it still leaves a row, so a shadow that
            # is misconfigured on a worker shows up as errors rather than as missing pairs.
            now = time.perf_counter_ns()
            result = RequestResult(intended_start=intended_start, sent=now, end=now)
            result.failure = RequestFailure(ErrorClass.CONNECT, redact(f"setup: {exc}"))
            log.warning("shadow %s on %s: %s", provider.name, context.worker_name, result.failure)
            return result
        return await _send_shadow(adapter, task, context, intended_start)


async def _send_shadow(
    adapter: Adapter, task: ShadowTask, context: WorkerContext, intended_start: int
) -> RequestResult:
    """Send ``task`` through a shadow provider's built adapter."""
    if isinstance(adapter, PostStreamAdapter) and adapter.parser is ChatParser and adapter.model:
        # Chat-completions dialects get the conversation and sampling parameters exactly
        # as the client sent them.
        call = HttpCall("POST", adapter.url, adapter.headers, shadow_body(adapter.model, task))
        return await measure_request(
            context.http,
            call,
            ChatParser,
            adapter.limits,
            adapter.retry,
            intended_start,
        )
    # Other dialects take one prompt: the conversation's text, turns labelled.
    messages = flat_messages(task.messages)
    text = "\n\n".join(f"{role}: {content}" for role, content in messages)
    request = PlannedRequest(
        task.seq,
        task.prompt_tokens or estimate_tokens(text),
        task.max_tokens or DEFAULT_MAX_TOKENS,
        messages[0][1] if len(messages) == 1 else text,
        messages,
    )
    return await adapter.measure(context.http, request, intended_start)
