"""The error of a provider that cannot be used from this worker (raised before any request)."""

from __future__ import annotations


class ProviderSetupError(Exception):
    """The provider cannot be used from this worker; the message says why."""
