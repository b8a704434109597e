"""Simulated upstreams behind a gateway (``scenario.upstreams``, docs/failover.md).

A failover scenario measures a gateway (any OpenAI-compatible URL, a provider of the
scenario) in front of simulated upstreams that ``tokenbench run`` starts on loopback at
the fixed ports given here, for the user to write into the gateway's configuration.
Each upstream logs what it received; after the run the log is joined to the records,
so every request says which upstreams it touched and whether it needed a fallback.

Upstreams bind ports, so they are the local user's: a scenario submitted over REST
cannot declare any (docs/security.md).
"""

from __future__ import annotations

from pydantic import Field

from scenarios.base import Name, StrictModel
from scenarios.limits import MAX_ID_CHARS, MAX_UPSTREAM_PORT, MIN_UPSTREAM_PORT
from scenarios.providers.simulate import SimulateSpec

__all__ = ["UPSTREAM_HOST", "Upstream"]

# Upstreams listen on loopback only: the gateway under test runs on the same machine.
UPSTREAM_HOST = "127.0.0.1"


class Upstream(StrictModel):
    """One simulated upstream, started on ``127.0.0.1:port`` for the run."""

    name: Name = Field(description="Name of the upstream in the report (unique).")
    port: int = Field(
        ge=MIN_UPSTREAM_PORT,
        le=MAX_UPSTREAM_PORT,
        description="Loopback port it listens on (the gateway is configured with it).",
    )
    model: str = Field(
        default="simulated", min_length=1, max_length=MAX_ID_CHARS, description="Model id reported."
    )
    simulate: SimulateSpec = Field(
        default_factory=SimulateSpec, description="Its behaviour and faults (simulate.faults)."
    )

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        return f"http://{UPSTREAM_HOST}:{self.port}/v1"
