"""Celery tasks: thin wrappers that validate the message and call plain async code."""

from __future__ import annotations

import logging
from typing import Any

from scenarios.wire.contract import RUN_SHADOW, RUN_SHADOW_BATCH, RUN_SHARD, ShadowBatch, ShadowTask
from workers.gateway.shadow import execute_shadow, execute_shadow_batch
from workers.runtime.celery_app import app
from workers.runtime.context import get_context
from workers.runtime.event_loop import run_in_loop
from workers.shard.execute import execute_shard
from workers.shard.run_spec import SpecUnavailable, resolve_shard

log = logging.getLogger("tokenbench.worker")


@app.task(name=RUN_SHARD)  # type: ignore[untyped-decorator]
def run_shard(spec: dict[str, Any]) -> int:
    """Execute one shard on this process's event loop; returns its record count. The
    message refers to its run's stored provider and workload (``workers/shard/run_spec.py``)."""

    async def execute() -> int:
        context = await get_context()
        try:
            shard = await resolve_shard(spec, context.redis)
        except SpecUnavailable as exc:
            # Not executable here; the control plane re-sends a shard that never started
            # (after a Redis state loss, or its watchdog), with its parts stored again.
            log.error("%s", exc)
            return 0
        return await execute_shard(shard, context)

    return run_in_loop(execute())


@app.task(name=RUN_SHADOW)  # type: ignore[untyped-decorator]
def run_shadow(payload: dict[str, Any]) -> int:
    """Send one sampled live request to this region's shadow providers; returns records.
    (What gateways sent before batches; kept so that such a gateway still works.)"""
    task = ShadowTask.model_validate(payload)

    async def execute() -> int:
        return await execute_shadow(task, await get_context())

    return run_in_loop(execute())


@app.task(name=RUN_SHADOW_BATCH)  # type: ignore[untyped-decorator]
def run_shadow_batch(payload: dict[str, Any]) -> int:
    """Send a gateway's batch of sampled live requests to this region's shadow providers,
    the samples concurrently; returns records."""
    batch = ShadowBatch.model_validate(payload)

    async def execute() -> int:
        return await execute_shadow_batch(batch, await get_context())

    return run_in_loop(execute())
