"""The error of a provider that cannot be used from this worker (raised before any request)."""

from __future__ import annotations

from scenarios.errors import BadInput


class ProviderSetupError(BadInput):
    """The provider cannot be used from this worker; the message says why."""
