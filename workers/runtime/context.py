"""Per-process resources of a worker: Redis, the HTTP client, simulated endpoints, secrets.

Created on the worker's event loop on first use and kept for the process's lifetime.
The HTTP client checks every connection it opens against the egress policy
(``scenarios/security/egress.py``); the simulated endpoints this worker starts are trusted by
exact address and port. Adapters read keys only through ``secrets``
(``workers/client/secrets.py``), which releases a value only for hosts its variable is bound to.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
from redis.asyncio import Redis

from scenarios.providers.base import ProviderBase
from scenarios.security.egress import EgressGuard
from scenarios.settings import Settings, env_name, get_settings
from workers.client.adapters import AdapterContext
from workers.client.http import make_client
from workers.client.secrets import Secrets, worker_secrets
from workers.runtime.broker import CLIENT_OPTIONS
from workers.runtime.event_loop import run_in_loop
from workers.simulator.pool import SimulatorPool


@dataclass
class WorkerContext:
    """Everything shard execution needs from its process."""

    settings: Settings
    redis: Redis
    http: httpx.AsyncClient
    simulators: SimulatorPool
    worker_name: str
    region: str
    secrets: Secrets = field(default_factory=Secrets)
    # Scrapes of providers' metrics_url (workers/shard/telemetry.py) use a client of their
    # own, so that they never take a measurement connection; None: ``http``.
    metrics_http: httpx.AsyncClient | None = None

    @contextlib.asynccontextmanager
    async def adapter_lease(self, provider: ProviderBase) -> AsyncIterator[AdapterContext]:
        """The narrow context an adapter of ``provider`` is built with, for the block:
        this worker's HTTP client and secrets, and its simulated endpoint if the provider
        is one (held until the block ends; raises SimulatorCapReached, a RuntimeError,
        when the worker runs as many simulators as it may, all in use)."""
        async with self.simulators.lease(provider) as endpoint:
            yield AdapterContext(self.http, self.secrets, endpoint)


_context: tuple[int, WorkerContext] | None = None


def worker_name() -> str:
    """The worker's name (its heartbeat key names it), recorded on every request row;
    ``host:pid`` outside a ``tokenbench worker``."""
    return os.environ.get("TOKENBENCH_WORKER_NAME") or f"{socket.gethostname()}:{os.getpid()}"


async def get_context() -> WorkerContext:
    """This process's context (must be called on the worker event loop)."""
    global _context  # noqa: PLW0603 - one context per process
    if _context is None or _context[0] != os.getpid():
        settings = get_settings()
        if settings.redis.url is None:
            raise RuntimeError(f"{env_name('redis.url')} is not set for this worker")
        guard = EgressGuard(settings.egress)
        name = worker_name()
        context = WorkerContext(
            settings=settings,
            redis=Redis.from_url(settings.redis.url, **CLIENT_OPTIONS),  # survives restarts
            http=make_client(guard=guard),
            simulators=SimulatorPool(
                on_start=guard.trust,
                on_stop=guard.distrust,
                idle_s=settings.worker.simulator_idle_s,
                max_processes=settings.worker.max_simulators,
            ),
            worker_name=name,
            region=settings.worker.region,
            secrets=worker_secrets(settings.worker.secret_hosts, f"worker {name}"),
            metrics_http=make_client(guard=guard),
        )
        _context = (os.getpid(), context)
    return _context[1]


def stop_simulators(timeout_s: float = 30.0) -> None:
    """At worker shutdown: stop the simulated endpoints this process's context started
    (they would also exit by themselves once the process is gone); a no-op without one."""
    if _context is None or _context[0] != os.getpid():
        return
    with contextlib.suppress(Exception):  # shutting down: nothing more to do about it
        run_in_loop(_context[1].simulators.close(), timeout_s)
