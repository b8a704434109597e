"""How hard a scenario pushes: ``load:``, its stages of concurrency levels (closed loop),
arrival rates (open loop) or stages decided while the run goes (docs/load.md,
docs/answers.md).

A value a run's overrides may also set (scenarios/overrides.py) has its bounds in one
type of scenarios/limits.py, shared by both.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from scenarios.base import StrictModel
from scenarios.limits import (
    MAX_BURSTINESS,
    MAX_DURATION_S,
    MAX_LEVELS,
    MIN_BURSTINESS,
    ConcurrencyLevel,
    Rate,
    StageRequests,
    StageSeconds,
)
from scenarios.load.adaptive import FindCapacity, Saturation, StopWhen, Sweep

Arrival = Literal["constant", "poisson", "gamma"]


class RateLoad(StrictModel):
    """Open-loop load: arrivals on a schedule computed up front from the seed; each rate
    is one stage. The client never waits for the server before the next arrival."""

    rps: list[Rate] = Field(
        min_length=1,
        max_length=MAX_LEVELS,
        description="Arrivals per second per provider and region; each value is a stage.",
    )
    arrival: Arrival = Field(
        default="poisson",
        description=(
            "Gaps between arrivals: constant, poisson (exponential) or gamma (shape = burstiness)."
        ),
    )
    burstiness: float = Field(
        default=1.0,
        ge=MIN_BURSTINESS,
        le=MAX_BURSTINESS,
        description="Gamma shape: 1 is Poisson, below 1 burstier, above 1 more regular.",
    )
    max_in_flight: ConcurrencyLevel | None = Field(
        default=None,
        description=(
            "Cap on requests in flight per provider and region; arrivals waiting for a "
            "slot keep their scheduled start, so the wait shows as schedule lag."
        ),
    )

    @field_validator("rps", mode="before")
    @classmethod
    def _scalar_to_list(cls, value: object) -> object:
        return [value] if isinstance(value, int | float) else value


class Load(StrictModel):
    """Stages of load, run one after another: concurrency levels (closed loop), rates
    (open loop), stages decided while the run goes (a sweep, a capacity search:
    docs/answers.md), or one replay of ``workload.replay``."""

    concurrency: list[ConcurrencyLevel] = Field(
        default_factory=list,
        max_length=MAX_LEVELS,
        description="Closed loop: virtual users per stage; each value is a stage.",
    )
    rate: RateLoad | None = Field(default=None, description="Open loop: arrival rates.")
    sweep: Sweep | None = Field(
        default=None,
        description=(
            "Synchronous, throughput, then open-loop rates between them, decided while "
            "the run goes; the report marks the knee (docs/answers.md)."
        ),
    )
    find_capacity: FindCapacity | None = Field(
        default=None,
        description=(
            "Search the highest rate (or concurrency) at which the SLO attainment holds, "
            "with confidence (docs/answers.md)."
        ),
    )
    requests_per_level: StageRequests | None = Field(
        default=None, description="Requests per stage and provider (per region)."
    )
    sessions_per_level: StageRequests | None = Field(
        default=None,
        description="With workload.sessions: sessions per stage and provider (per region).",
    )
    duration_s: StageSeconds | None = Field(
        default=None,
        description="Stage length, warm-up and cool-down included; no new request starts after it.",
    )
    warmup_s: float = Field(
        default=0.0,
        ge=0,
        le=MAX_DURATION_S,
        description="Start of each stage whose requests are recorded but not steady state.",
    )
    cooldown_s: float = Field(
        default=0.0,
        ge=0,
        le=MAX_DURATION_S,
        description="End of each stage whose requests are recorded but not steady state.",
    )
    stop_when: StopWhen | None = Field(
        default=None,
        description=(
            "Stop a stage once a percentile's confidence interval is tight enough "
            "(docs/answers.md)."
        ),
    )
    saturation: Saturation | None = Field(
        default=None,
        description=(
            "Over-saturation of open-loop stages: stop (the default for sweeps and "
            "capacity searches), mark, or off (the default for fixed levels)."
        ),
    )

    @field_validator("concurrency", mode="before")
    @classmethod
    def _scalar_to_list(cls, value: object) -> object:
        return [value] if isinstance(value, int) else value

    @model_validator(mode="after")
    def _one_shape(self) -> Load:
        shapes = [
            name
            for name, given in (
                ("concurrency", bool(self.concurrency)),
                ("rate", self.rate is not None),
                ("sweep", self.sweep is not None),
                ("find_capacity", self.find_capacity is not None),
            )
            if given
        ]
        if len(shapes) > 1:
            raise ValueError(
                "give one of concurrency (closed loop), rate (open loop), sweep or "
                f"find_capacity, not both {' and '.join(shapes)}"
            )
        if self.adaptive and self.requests_per_level is None:
            # The rates of decided stages are not known up front: a request count is what
            # bounds what each one may send (docs/security.md).
            raise ValueError(f"{shapes[0]} needs requests_per_level (each stage's bound)")
        if self.duration_s is not None and self.warmup_s + self.cooldown_s >= self.duration_s:
            raise ValueError("warmup_s + cooldown_s must be shorter than duration_s")
        search = self.find_capacity
        if search is not None and (self.requests_per_level or 0) < search.requests_to_pass():
            raise ValueError(
                f"find_capacity: attainment {search.attainment:g} can be shown with "
                f"{search.confidence:g} confidence only by stages of at least "
                f"{search.requests_to_pass()} requests (all meeting the SLO); "
                f"requests_per_level is {self.requests_per_level}"
            )
        return self

    @property
    def kind(self) -> Literal["closed", "open"]:
        """``open`` for rates (and replay), ``closed`` for concurrency levels."""
        return "closed" if self.concurrency else "open"

    @property
    def adaptive(self) -> bool:
        """True when stages are decided while the run goes (a sweep, a capacity search)."""
        return self.sweep is not None or self.find_capacity is not None

    @property
    def saturation_action(self) -> Literal["stop", "mark", "off"]:
        """What over-saturation of an open-loop stage does: as configured, else ``stop``
        for decided stages (they exist to find the limit) and ``off`` for fixed levels
        (the user asked for exactly those)."""
        if self.saturation is not None:
            return self.saturation.action
        return "stop" if self.adaptive else "off"

    def max_stages(self) -> int:
        """Stages the load runs at most (an adaptive load decides up to this many)."""
        if self.sweep is not None:
            return 2 + self.sweep.points
        if self.find_capacity is not None:
            return self.find_capacity.max_stages
        return len(self.levels())

    def levels(self) -> list[float]:
        """The stage values in order: concurrencies, or rates (rps); empty for replay and
        for decided stages (not known up front)."""
        if self.rate is not None:
            return list(self.rate.rps)
        return [float(level) for level in self.concurrency]
