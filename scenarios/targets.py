"""Endpoint targets: which endpoints a run measures, and which of them it holds alone.

A **target** is what two runs must not measure at once unawares: a provider's endpoint
URL (normalised: scheme and host in lower case, the default port and trailing slashes
dropped), its model, and the variable its key comes from (two keys of one hosted API
are two quotas, so two targets). Leases are derived, never stored: a target is busy
while a run the control loop drives (``ControlPlane.runs``, resumed after a restart)
measures it (``api/control/queue.py``). A lease therefore ends with its run — finished,
failed, cancelled — and cannot outlive a restart (docs/teams.md, decision in
docs/decisions.md).

``kind: simulated`` providers have no target: each worker starts its own simulator on
loopback for the shard, so no two runs ever share one.

A provider with ``shared: true`` takes no lease of its own: runs measuring a target
shared wait only for a run holding it alone, run beside each other, and their reports
name the runs that overlapped them (analytics/report/overlaps.py).
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from scenarios.model import Scenario
from scenarios.security.egress import provider_endpoints

_DEFAULT_PORTS = {"http": 80, "https": 443}


def normalise_url(url: str) -> str:
    """``url`` as one spelling: scheme and host lower case, no default port, no
    trailing slash, no query or fragment (``HTTP://Host:80/v1/`` → ``http://host/v1``)."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    port = parts.port
    netloc = host if port is None or port == _DEFAULT_PORTS.get(scheme) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), "", ""))


def provider_target(provider: object) -> str | None:
    """The provider's target (URL, model, key variable), or None for a simulated one."""
    endpoints = provider_endpoints(provider)
    if not endpoints:
        return None
    key = getattr(provider, "api_key_env", None) or getattr(provider, "access_key_id_env", None)
    model = getattr(provider, "model", "")
    return f"{normalise_url(endpoints[0].url)} model={model} key={key or '-'}"


def leased_targets(scenario: Scenario) -> frozenset[str]:
    """The targets the run holds alone while it goes (its providers without ``shared``)."""
    return frozenset(
        target
        for provider in scenario.providers
        if not provider.shared and (target := provider_target(provider)) is not None
    )


def shared_targets(scenario: Scenario) -> dict[str, str]:
    """Provider name → target, of the providers measured ``shared: true``."""
    return {
        provider.name: target
        for provider in scenario.providers
        if provider.shared and (target := provider_target(provider)) is not None
    }


def all_targets(scenario: Scenario) -> frozenset[str]:
    """Every target the run measures, shared or not."""
    return frozenset(
        target for provider in scenario.providers if (target := provider_target(provider))
    )


def target_modes(scenario: Scenario) -> dict[str, bool]:
    """Every target the run measures → whether it holds it alone (True) or measures it
    ``shared`` (False); alone wins when two providers of the run name one target."""
    modes: dict[str, bool] = {}
    for provider in scenario.providers:
        target = provider_target(provider)
        if target is not None:
            modes[target] = modes.get(target, False) or not provider.shared
    return modes
