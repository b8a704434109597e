"""Celery tasks: thin wrappers that validate the message and call plain async code."""

from __future__ import annotations

from typing import Any

from scenarios.wire import RUN_SHADOW, RUN_SHARD, ShadowTask, ShardSpec
from workers.celery_app import app
from workers.context import get_context
from workers.event_loop import run_in_loop
from workers.shadow import execute_shadow
from workers.shard import execute_shard


@app.task(name=RUN_SHARD)  # type: ignore[untyped-decorator]
def run_shard(spec: dict[str, Any]) -> int:
    """Execute one shard on this process's event loop; returns its record count."""
    shard = ShardSpec.model_validate(spec)

    async def execute() -> int:
        return await execute_shard(shard, await get_context())

    return run_in_loop(execute())


@app.task(name=RUN_SHADOW)  # type: ignore[untyped-decorator]
def run_shadow(payload: dict[str, Any]) -> int:
    """Send one sampled live request to this region's shadow providers; returns records."""
    task = ShadowTask.model_validate(payload)

    async def execute() -> int:
        return await execute_shadow(task, await get_context())

    return run_in_loop(execute())
