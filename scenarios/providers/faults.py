"""Faults a simulated endpoint injects (``simulate.faults``), one model per kind.

Each fault fires on a share of requests (``rate``, a seeded draw), during periodic
bursts (``burst``: every ``every_s`` seconds for ``for_s`` seconds, all of them unless a
``rate`` is given too), or both. The burst clock starts at the first chat request the
endpoint receives, so "fails 100 % for 2 s every 10 s" lands on the same requests of a
run whatever the gateway's start-up took (docs/failover.md). The kinds:

- ``http_429``: a 429 with ``Retry-After`` (``retry_after_s``), as a rate limiter;
- ``http_5xx``: an error ``status`` (500 to 599), as an overloaded or broken upstream;
- ``reset``: the connection is closed before any byte of an answer (a crash, a reset);
- ``stall``: ``stall_ms`` of silence before the first byte (then the answer);
- ``cut``: the stream stops halfway, without its end.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import Field, model_validator

from scenarios.base import StrictModel
from scenarios.limits import MAX_BURST_PERIOD_S, MAX_LATENCY_MS, MAX_RETRY_AFTER_S

__all__ = ["FAULT_KINDS", "Burst", "Fault", "FaultKind", "error_kinds"]


class Burst(StrictModel):
    """Periodic windows in which a fault applies: ``[offset_s + k·every_s, +for_s)``."""

    every_s: float = Field(gt=0, le=MAX_BURST_PERIOD_S, description="Period of the bursts.")
    for_s: float = Field(gt=0, le=MAX_BURST_PERIOD_S, description="Length of each burst.")
    offset_s: float = Field(
        default=0.0,
        ge=0,
        le=MAX_BURST_PERIOD_S,
        description="Start of the first burst after the endpoint's first chat request.",
    )

    @model_validator(mode="after")
    def _fits_period(self) -> Burst:
        if self.for_s > self.every_s:
            raise ValueError(f"for_s {self.for_s:g} is longer than every_s {self.every_s:g}")
        return self

    def covers(self, elapsed_s: float) -> bool:
        """True when ``elapsed_s`` (since the clock's start) falls inside a burst."""
        return (elapsed_s - self.offset_s) % self.every_s < self.for_s


class _FaultBase(StrictModel):
    rate: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description=(
            "Share of requests the fault hits (a seeded draw); within bursts when burst is "
            "given (default there: 1, every request)."
        ),
    )
    burst: Burst | None = Field(default=None, description="Periodic windows of the fault.")

    @model_validator(mode="after")
    def _when(self) -> _FaultBase:
        if self.rate is None and self.burst is None:
            raise ValueError("give rate, burst or both: when the fault applies")
        return self


class Http429Fault(_FaultBase):
    """Answer 429 Too Many Requests with a Retry-After header."""

    kind: Literal["http_429"] = Field(description="Fault kind.")
    retry_after_s: float = Field(
        default=1.0,
        ge=0,
        le=MAX_RETRY_AFTER_S,
        description="Retry-After sent with the 429 (seconds, rounded up to whole ones).",
    )


class Http5xxFault(_FaultBase):
    """Answer with a server error status."""

    kind: Literal["http_5xx"] = Field(description="Fault kind.")
    status: int = Field(default=503, ge=500, le=599, description="HTTP status sent.")


class ResetFault(_FaultBase):
    """Close the connection before any byte of the answer."""

    kind: Literal["reset"] = Field(description="Fault kind.")


class StallFault(_FaultBase):
    """Stay silent before the first byte, then answer."""

    kind: Literal["stall"] = Field(description="Fault kind.")
    stall_ms: float = Field(gt=0, le=MAX_LATENCY_MS, description="Silence before the answer.")


class CutFault(_FaultBase):
    """Stop the stream halfway, without its terminating chunk."""

    kind: Literal["cut"] = Field(description="Fault kind.")


Fault = Annotated[
    Http429Fault | Http5xxFault | ResetFault | StallFault | CutFault,
    Field(discriminator="kind"),
]
FaultKind = Literal["http_429", "http_5xx", "reset", "stall", "cut"]
FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)


def error_kinds() -> tuple[str, ...]:
    """Kinds that replace the answer with a failure before any byte of it."""
    return ("http_429", "http_5xx", "reset")
