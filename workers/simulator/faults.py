"""Which faults one request of the simulated endpoint suffers (pure logic, seeded).

The scenario's legacy rates (``error_rate``, ``stall_rate``, ``cut_rate``,
``unfinished_rate``) are drawn first and in their old order, so runs that use only them
keep their draws; the ``faults`` list is checked after, in order, with its bursts timed
from the first chat request (``FaultPlan.origin``). A request hit by several faults:
stalls come first and add up, then the first failure that fired (legacy error, then the
list in order) answers instead of the stream; otherwise a cut stops the stream halfway.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from scenarios.providers.faults import (
    CutFault,
    Fault,
    Http5xxFault,
    Http429Fault,
    ResetFault,
    StallFault,
)
from scenarios.providers.simulate import SimulateSpec


@dataclass(slots=True)
class Faults:
    """What one request suffers; ``kind`` names the failure (or cut) for the log."""

    status: int | None = None  # an error answer's HTTP status instead of the stream
    retry_after_s: int | None = None  # with a 429
    reset: bool = False  # the connection closed before any byte
    stall_ms: float = 0.0
    cut: bool = False
    unfinished: bool = False
    kind: str | None = None

    @property
    def fails(self) -> bool:
        """True when no stream is sent at all (an error status or a reset)."""
        return self.status is not None or self.reset


class FaultPlan:
    """Draws each request's faults from the spec with one seeded RNG."""

    def __init__(self, spec: SimulateSpec, rng: random.Random) -> None:
        self.spec = spec
        self.rng = rng
        self.origin: float | None = None  # monotonic seconds of the first chat request

    def _hits(self, rate: float | None) -> bool:
        # Certain outcomes draw nothing, so adding a fault with rate 1 (or a burst alone)
        # does not shift the draws of the faults after it.
        if rate is None or rate >= 1:
            return True
        return rate > 0 and self.rng.random() < rate

    def draw(self, now_s: float) -> Faults:
        """The faults of a request received at monotonic ``now_s``."""
        spec, rng = self.spec, self.rng
        faults = Faults()
        if spec.error_rate > 0 and rng.random() < spec.error_rate:
            faults.status = spec.error_status
            faults.retry_after_s = 1 if spec.error_status == 429 else None
            faults.kind = _status_kind(spec.error_status)
        legacy_stall = spec.stall_rate > 0 and rng.random() < spec.stall_rate
        if legacy_stall and not faults.fails:  # as before: an error answer does not stall
            faults.stall_ms = spec.stall_ms
        faults.cut = spec.cut_rate > 0 and rng.random() < spec.cut_rate
        # Drawn only when set, so runs without it keep their fault draws.
        faults.unfinished = spec.unfinished_rate > 0 and rng.random() < spec.unfinished_rate
        if not spec.faults:
            return faults
        if self.origin is None:
            self.origin = now_s
        elapsed = now_s - self.origin
        for fault in spec.faults:
            if fault.burst is not None and not fault.burst.covers(elapsed):
                continue
            if self._hits(fault.rate):
                _apply(fault, faults)
        return faults


def _apply(fault: Fault, faults: Faults) -> None:
    """Add one fault that fired to what the request suffers."""
    if isinstance(fault, StallFault):
        faults.stall_ms += fault.stall_ms
    elif isinstance(fault, CutFault):
        faults.cut = True
    elif faults.fails:
        return  # the first failure answers
    elif isinstance(fault, Http429Fault):
        faults.status, faults.kind = 429, "http_429"
        faults.retry_after_s = math.ceil(fault.retry_after_s)
    elif isinstance(fault, Http5xxFault):
        faults.status, faults.kind = fault.status, "http_5xx"
    elif isinstance(fault, ResetFault):
        faults.reset, faults.kind = True, "reset"


def _status_kind(status: int) -> str:
    if status == 429:
        return "http_429"
    return "http_5xx" if status >= 500 else "http_4xx"
