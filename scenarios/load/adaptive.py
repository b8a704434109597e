"""Adaptive load: stages the control plane decides while the run goes (docs/answers.md).

- ``load.sweep``: a synchronous stage (one stream), a throughput stage that saturates
  the endpoint, then ``points`` open-loop rates spread between the two rates measured;
  the report draws the latency-vs-throughput curve and marks its knee.
- ``load.find_capacity``: a search for the highest rate (or concurrency) at which the
  SLO attainment holds with confidence, per provider, stopping at ``precision`` or after
  ``max_stages`` stages.
- ``load.stop_when``: stop a stage once the confidence interval of a percentile is tight
  enough; ``load.saturation``: stop (or mark) an open-loop stage whose queue grows
  without bound.

Everything here is bounded (scenarios/limits.py): a REST submitter can neither make the
service decide stages forever nor spend requests without limit.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Literal

from pydantic import Field, field_validator

from scenarios.base import StrictModel
from scenarios.limits import (
    MAX_CONCURRENCY,
    MAX_CONFIDENCE,
    MAX_DURATION_S,
    MAX_KNEE_FACTOR,
    MAX_QUANTILE,
    MAX_REQUESTS_PER_LEVEL,
    MAX_RPS,
    MAX_SEARCH_STAGES,
    MAX_SWEEP_POINTS,
    MIN_PRECISION,
    MIN_SEARCH_STAGES,
)
from scenarios.slo import SLO

__all__ = [
    "DEFAULT_THROUGHPUT_CONCURRENCY",
    "FindCapacity",
    "Saturation",
    "SearchArrival",
    "StopWhen",
    "Sweep",
]

# Streams of the throughput stage: vLLM's default max_num_seqs is 256, so 256 streams
# keep a default server's batch full and its queue non-empty. Hosted APIs with low rate
# limits want less (a 429 is an error, not throughput).
DEFAULT_THROUGHPUT_CONCURRENCY = 256

SearchArrival = Literal["poisson", "constant"]


class Sweep(StrictModel):
    """A synchronous stage, a throughput stage, then ``points`` open-loop rates evenly
    spaced strictly between the two rates they measured (per provider)."""

    points: int = Field(
        ge=1,
        le=MAX_SWEEP_POINTS,
        description="Open-loop rates between the synchronous and the throughput rate.",
    )
    arrival: SearchArrival = Field(
        default="poisson", description="Arrivals of the open-loop stages: poisson or constant."
    )
    throughput_concurrency: int = Field(
        default=DEFAULT_THROUGHPUT_CONCURRENCY,
        ge=1,
        le=MAX_CONCURRENCY,
        description="Streams of the throughput stage (closed loop), enough to saturate.",
    )
    knee_factor: float = Field(
        default=2.0,
        gt=1,
        le=MAX_KNEE_FACTOR,
        description=(
            "The knee is the highest-throughput point whose median TTFT stays within "
            "this factor of the synchronous stage's (docs/answers.md)."
        ),
    )


def _fraction(value: object) -> object:
    """``"5%"`` → 0.05; numbers pass as they are."""
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            return float(value.strip().removesuffix("%")) / 100
        except ValueError:
            return value  # the float validator names the field
    return value


class FindCapacity(StrictModel):
    """Search the highest load at which ``attainment`` of the requests meet ``slo``,
    with ``confidence``; stop when the bracket is within ``precision``."""

    slo: SLO = Field(description="The objective a request must meet (at least one target).")
    attainment: float = Field(
        default=0.99,
        ge=0.5,
        le=MAX_QUANTILE,
        description="Share of requests that must meet the SLO (failures count as misses).",
    )
    precision: float = Field(
        default=0.05,
        ge=MIN_PRECISION,
        le=0.5,
        description="Relative width of the final bracket, e.g. 0.05 or '5%'.",
    )
    confidence: float = Field(
        default=0.95,
        ge=0.5,
        le=MAX_CONFIDENCE,
        description="Confidence of each stage's pass/fail verdict (Wilson interval).",
    )
    by: Literal["rate", "concurrency"] = Field(
        default="rate",
        description="Search open-loop rates (req/s) or closed-loop concurrency.",
    )
    arrival: SearchArrival = Field(
        default="poisson", description="Arrivals of the open-loop stages (by: rate)."
    )
    throughput_concurrency: int = Field(
        default=DEFAULT_THROUGHPUT_CONCURRENCY,
        ge=1,
        le=MAX_CONCURRENCY,
        description=(
            "by: rate, streams of the throughput stage whose rate bounds the search; "
            "by: concurrency, the highest concurrency probed."
        ),
    )
    max_rps: float | None = Field(
        default=None,
        gt=0,
        le=MAX_RPS,
        description="by: rate, the highest rate probed (default: the largest a stage may have).",
    )
    max_stages: int = Field(
        default=12,
        ge=MIN_SEARCH_STAGES,
        le=MAX_SEARCH_STAGES,
        description="Stages of the search at most, its first synchronous stage included.",
    )

    @field_validator("precision", mode="before")
    @classmethod
    def _percent(cls, value: object) -> object:
        return _fraction(value)

    def requests_to_pass(self) -> int:
        """Requests a stage needs before it can pass at all: with every one meeting the
        SLO, the Wilson bound of the final verdict (at 1 − α/2) reaches ``attainment``
        only past n = z²·a/(1 − a) (docs/answers.md)."""
        z = NormalDist().inv_cdf(1 - (1 - self.confidence) / 4)
        return math.ceil(z * z * self.attainment / (1 - self.attainment))

    @field_validator("slo")
    @classmethod
    def _has_target(cls, value: SLO) -> SLO:
        if value.ttft_ms is None and value.tpot_ms is None and value.e2e_ms is None:
            raise ValueError("give at least one of ttft_ms, tpot_ms, e2e_ms")
        return value


class StopWhen(StrictModel):
    """Stop a stage once the ``confidence`` interval of the ``quantile`` of ``metric``
    is within ``rel_ci`` of it (half-width ÷ value), in every region, after at least
    ``min_requests`` successful requests per region."""

    metric: Literal["ttft", "tpot", "e2e"] = Field(
        default="ttft", description="The latency whose percentile decides."
    )
    quantile: float = Field(
        default=0.99, gt=0, le=MAX_QUANTILE, description="The percentile, e.g. 0.99."
    )
    rel_ci: float = Field(
        ge=MIN_PRECISION, le=1, description="Largest half-width of the interval ÷ the value."
    )
    min_requests: int = Field(
        default=100,
        ge=1,
        le=MAX_REQUESTS_PER_LEVEL,
        description="Successful requests per region before a stage may stop.",
    )
    confidence: float = Field(
        default=0.95, ge=0.5, le=MAX_CONFIDENCE, description="Confidence of the interval."
    )

    @field_validator("rel_ci", mode="before")
    @classmethod
    def _percent(cls, value: object) -> object:
        return _fraction(value)


class Saturation(StrictModel):
    """Over-saturation of an open-loop stage: latency from intent growing without bound
    while the queue grows (docs/answers.md). ``stop`` ends the stage's shards for that
    provider in every region, ``mark`` only records it, ``off`` never looks."""

    action: Literal["stop", "mark", "off"] = Field(
        default="stop", description="What to do with a stage found over-saturated."
    )
    min_s: float = Field(
        default=5.0,
        gt=0,
        le=MAX_DURATION_S,
        description="Seconds a stage runs before it may be judged.",
    )
    min_requests: int = Field(
        default=40,
        ge=8,
        le=MAX_REQUESTS_PER_LEVEL,
        description="Completed requests of a provider and region before it may be judged.",
    )
