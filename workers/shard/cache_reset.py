"""The provider's prefix cache emptied before a stage's load (``cache_reset``,
docs/providers.md "Cache reset").

Sent by the shard the planner marked (``ShardSpec.reset_cache``: one part of each
provider, region and stage, every part of a simulated provider), after its inputs are
ready and before its stage clock starts, so the stage's first requests find an empty
cache. The request goes only to the provider's own origin (checked at validation and
again here), through the worker's egress-guarded client, with the provider's key when it
has one (bound to that host like every key). Its outcome (``ok``, ``failed``: the server
answered an error status, ``error``: no answer) is published as a lifecycle event and
stored per run, stage, provider and region; a failed reset never fails the shard: the
stage runs with whatever the cache holds, and the report says so.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

import httpx

from scenarios.errors import TokenbenchError
from scenarios.providers.cache_reset import cache_reset_url, same_origin
from scenarios.security.egress import EgressDenied, check_url
from scenarios.wire.contract import EventType, ShardSpec
from workers.client.streaming import json_headers
from workers.runtime.context import WorkerContext
from workers.shard.publisher import ShardPublisher

__all__ = ["ResetOutcome", "reset_cache", "reset_target"]

log = logging.getLogger("tokenbench.worker")

# A reset is one small POST: a server that takes longer is reported, not waited for.
RESET_TIMEOUT_S = 30.0
# The server's answer is kept this short in the record (it is a status, not a payload).
MAX_MESSAGE_CHARS = 200
SIMULATOR_PATH = "/reset_prefix_cache"


@dataclass(frozen=True, slots=True)
class ResetOutcome:
    """How one reset went."""

    started_at: float  # epoch seconds
    status: str  # ok | failed | error
    http_status: int | None
    message: str


def reset_target(provider: Any, endpoint: str | None) -> tuple[str, str]:
    """The URL to POST and the base URL it must share an origin with: a simulated
    provider's own endpoint (``endpoint``, its API at …/v1), else the provider's
    ``cache_reset`` on its ``base_url``."""
    if provider.kind == "simulated":
        if endpoint is None:
            raise ValueError("no simulated endpoint was started")
        root = endpoint.rstrip("/").removesuffix("/v1")
        return root + SIMULATOR_PATH, endpoint
    base_url: str = provider.base_url
    return cache_reset_url(provider.cache_reset, base_url), base_url


async def reset_cache(
    spec: ShardSpec, context: WorkerContext, publisher: ShardPublisher, endpoint: str | None
) -> ResetOutcome | None:
    """Empty the provider's prefix cache if the planner marked this shard to; publish and
    return the outcome (None: nothing to do)."""
    provider: Any = spec.provider
    if not spec.reset_cache or getattr(provider, "cache_reset", None) is None:
        return None
    outcome = await _send(provider, context, endpoint)
    if outcome.status != "ok":
        log.warning("cache reset of %s: %s", provider.name, outcome.message)
    await publisher.event(
        EventType.CACHE_RESET,
        started_at=outcome.started_at,
        status=outcome.status,
        http_status=-1 if outcome.http_status is None else outcome.http_status,
        message=outcome.message,
        worker=context.worker_name,
        region=context.region,
    )
    return outcome


async def _send(provider: Any, context: WorkerContext, endpoint: str | None) -> ResetOutcome:
    started_at = time.time()
    try:
        url, base_url = reset_target(provider, endpoint)
        if not same_origin(url, base_url):  # validated already; never trusted blindly
            raise EgressDenied(f"{url!r} is not on the provider's origin")
        if provider.kind != "simulated":  # the worker started the simulator itself
            await asyncio.to_thread(check_url, url, context.settings.egress, True)
        key = context.secrets.get(getattr(provider, "api_key_env", None), url, provider.name)
        client = context.metrics_http or context.http
        headers = json_headers(key, accept="application/json")
        async with client.stream(
            "POST", url, headers=headers, content=b"", timeout=RESET_TIMEOUT_S
        ) as response:
            body = await _head(response)
    except (httpx.HTTPError, OSError, ValueError, RuntimeError, TokenbenchError) as exc:
        # EgressDenied, a refused or unset key: errors with their reason, never the key.
        return ResetOutcome(started_at, "error", None, _clip(f"{type(exc).__name__}: {exc}"))
    status = "ok" if response.is_success else "failed"
    text = "" if response.is_success else body.decode("utf-8", "replace").strip()
    message = f"HTTP {response.status_code}" + (f": {text}" if text else "")
    return ResetOutcome(started_at, status, response.status_code, _clip(message))


async def _head(response: httpx.Response) -> bytes:
    """The first bytes of the answer: a status is all it may say."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) >= MAX_MESSAGE_CHARS:
            break
    return bytes(body[:MAX_MESSAGE_CHARS])


def _clip(text: str) -> str:
    return text[:MAX_MESSAGE_CHARS]
