"""Provider adapters: one per wire dialect, registered under the scenario's ``kind``.

An adapter is built once per shard (resolving its endpoint, reading its key from the
worker's environment) and then measures requests. Every adapter returns a
RequestResult with the stamps of DOMAIN §1 and never raises for a request's own
failure; setup problems (a missing key variable) raise ProviderSetupError before any
request is sent.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

import httpx

from scenarios.model import AnyProvider, ProviderBase
from workers.client.result import RequestResult
from workers.context import WorkerContext
from workers.prompts import PlannedRequest


class ProviderSetupError(Exception):
    """The provider cannot be used from this worker; the message says why."""


class Adapter(Protocol):
    """Measures requests against one provider."""

    async def measure(
        self, http: httpx.AsyncClient, request: PlannedRequest, intended_start: int
    ) -> RequestResult:
        """Send ``request`` and return its stamps; failures are classified, not raised."""
        ...


P = TypeVar("P", bound=ProviderBase)
AdapterFactory = Callable[[P, WorkerContext], Awaitable[Adapter]]

_REGISTRY: dict[str, AdapterFactory[ProviderBase]] = {}


def register(kind: str) -> Callable[[AdapterFactory[P]], AdapterFactory[P]]:
    """Register ``factory`` as the adapter of provider ``kind``."""

    def decorate(factory: AdapterFactory[P]) -> AdapterFactory[P]:
        _REGISTRY[kind] = factory  # type: ignore[assignment]
        return factory

    return decorate


async def build_adapter(provider: AnyProvider, context: WorkerContext) -> Adapter:
    """The adapter for ``provider``'s kind, ready to measure."""
    factory = _REGISTRY.get(provider.kind)
    if factory is None:
        raise ProviderSetupError(f"no adapter registered for kind {provider.kind!r}")
    return await factory(provider, context)


def read_secret(variable: str | None, provider: str, context: WorkerContext) -> str | None:
    """Value of a credential variable from this worker's environment (None if not named).
    Read at each shard start and kept only in the adapter's memory."""
    if variable is None:
        return None
    value = os.environ.get(variable)
    if not value:
        raise ProviderSetupError(
            f"provider {provider!r}: environment variable {variable} is not set "
            f"on worker {context.worker_name}"
        )
    return value
