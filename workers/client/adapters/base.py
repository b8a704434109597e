"""Provider adapters: one per wire dialect, registered under the scenario's ``kind``.

An adapter is built once per shard (resolving its endpoint, reading its key through
the worker's secret lookup, which releases it only for a host the variable is bound to)
and then measures requests. Every adapter returns a RequestResult with the stamps of
the measurement definitions and never raises for a request's own failure; setup
problems (a missing or unbound key variable) raise ProviderSetupError before any
request is sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

import httpx

from scenarios.model import AnyProvider, ProviderBase
from workers.client.result import RequestResult
from workers.context import WorkerContext
from workers.prompts import PlannedRequest
from workers.provider_setup import ProviderSetupError
from workers.secrets import host_of

__all__ = ["Adapter", "ProviderSetupError", "build_adapter", "read_secret", "register"]


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


def read_secret(
    variable: str | None, url: str, provider: str, context: WorkerContext
) -> str | None:
    """Value of a credential variable for requests to ``url`` (None if none is named),
    released by the worker's secret lookup only if the variable is bound to that host.
    Read at each shard start and kept only in the adapter's memory."""
    return context.secrets.get(variable, host_of(url), provider)
