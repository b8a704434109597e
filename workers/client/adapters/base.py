"""Provider adapters: one per wire dialect, registered under the scenario's ``kind``.

An adapter is built once per shard from an :class:`AdapterContext` (reading its key
through the secret lookup, which releases it only for a host the variable is bound to)
and then measures requests. The context is all an adapter may use of its process: the
client is a library, so a worker and ``tokenbench providers check`` build adapters
alike, without Redis or any other worker runtime. Every adapter returns a RequestResult
with the stamps of the measurement definitions and never raises for a request's own
failure; setup problems (a missing or unbound key variable) raise ProviderSetupError
before any request is sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

import httpx

from scenarios.providers.base import ProviderBase
from scenarios.providers.kinds import AnyProvider
from workers.client.provider_setup import ProviderSetupError
from workers.client.result import RequestResult
from workers.client.secrets import Secrets
from workers.prompts.plan import PlannedRequest

__all__ = [
    "Adapter",
    "AdapterContext",
    "ProviderSetupError",
    "build_adapter",
    "read_secret",
    "register",
]


@dataclass(frozen=True)
class AdapterContext:
    """What an adapter factory may use of the process that builds it."""

    http: httpx.AsyncClient  # the client the adapter will measure with
    secrets: Secrets  # releases a key variable only for the hosts it is bound to
    # Base URL of an endpoint the caller starts at run time (the simulated provider's
    # loopback server): resolved by the caller, so the client never starts processes.
    endpoint: str | None = None


class Adapter(Protocol):
    """Measures requests against one provider."""

    async def measure(
        self, http: httpx.AsyncClient, request: PlannedRequest, intended_start: int
    ) -> RequestResult:
        """Send ``request`` and return its stamps; failures are classified, not raised."""
        ...


P = TypeVar("P", bound=ProviderBase)
AdapterFactory = Callable[[P, AdapterContext], Awaitable[Adapter]]

_REGISTRY: dict[str, AdapterFactory[ProviderBase]] = {}


def register(kind: str) -> Callable[[AdapterFactory[P]], AdapterFactory[P]]:
    """Register ``factory`` as the adapter of provider ``kind``."""

    def decorate(factory: AdapterFactory[P]) -> AdapterFactory[P]:
        _REGISTRY[kind] = factory  # type: ignore[assignment]
        return factory

    return decorate


async def build_adapter(provider: AnyProvider, context: AdapterContext) -> Adapter:
    """The adapter for ``provider``'s kind, ready to measure."""
    factory = _REGISTRY.get(provider.kind)
    if factory is None:
        raise ProviderSetupError(f"no adapter registered for kind {provider.kind!r}")
    return await factory(provider, context)


def read_secret(
    variable: str | None, url: str, provider: str, context: AdapterContext
) -> str | None:
    """Value of a credential variable for requests to ``url`` (None if none is named),
    released by the context's secret lookup only if the variable is bound to that URL's
    scheme, host and port.
    Read at each shard start and kept only in the adapter's memory."""
    return context.secrets.get(variable, url, provider)
