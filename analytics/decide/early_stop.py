"""``load.stop_when``: stop a stage once a percentile is known precisely enough.

The interval of the ``q`` quantile of ``n`` successful requests is the distribution-free
one between two order statistics: ranks ``⌊nq − z·√(nq(1−q))⌋`` and ``⌈nq +
z·√(nq(1−q))⌉ + 1`` (1-based; the normal approximation of the binomial count of values
below the quantile). It needs no assumption about the latency's distribution, and it
does not exist until the sample reaches past the quantile on both sides: a p99 needs a
few hundred requests before its interval closes at all. The stage stops when, in every
region of a provider, at least ``min_requests`` requests succeeded and the interval's
half-width is at most ``rel_ci`` of the estimate (docs/answers.md).

The query computes the two order statistics on the stage's stored rows
(``analytics/sql/stage_monitor.sql``); this module does the arithmetic and the verdict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

__all__ = ["QuantileInterval", "interval_ranks", "tight_enough"]


def interval_ranks(n: int, quantile: float, confidence: float) -> tuple[int, int] | None:
    """1-based ranks of the order statistics bounding the ``quantile`` at ``confidence``
    among ``n`` sorted values; None when the sample cannot bound it on both sides."""
    if n < 2:
        return None
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    centre = n * quantile
    spread = z * math.sqrt(n * quantile * (1 - quantile))
    low = math.floor(centre - spread)
    high = math.ceil(centre + spread) + 1
    if low < 1 or high > n:
        return None
    return low, high


@dataclass(frozen=True, slots=True)
class QuantileInterval:
    """One region's percentile estimate and interval so far."""

    region: str
    n: int
    estimate: float | None
    low: float | None
    high: float | None

    @property
    def relative_half_width(self) -> float | None:
        """Half the interval ÷ the estimate (None while there is no interval)."""
        if self.estimate is None or self.low is None or self.high is None or self.estimate <= 0:
            return None
        return (self.high - self.low) / 2 / self.estimate


def tight_enough(regions: Sequence[QuantileInterval], min_requests: int, rel_ci: float) -> bool:
    """True when every region has ``min_requests`` and an interval within ``rel_ci``."""
    if not regions:
        return False
    for region in regions:
        width = region.relative_half_width
        if region.n < min_requests or width is None or width > rel_ci:
            return False
    return True
