"""Percentiles of large samples from log-bucketed histograms, with a relative error bound.

A value v > 0 goes to bucket b = ceil(ln v / ln γ), i.e. (γ^(b−1), γ^b], with
γ = (1 + α)/(1 − α); the bucket's representative 2γ^b/(γ + 1) is within a factor α of
every value in it (the DDSketch construction). Values ≤ 0 (an ITL gap between two events
read together) have their own bucket, represented by 0. Histograms of shards add up
bucket by bucket, so a stage's histogram is exact arithmetic on stored rows.

The q-quantile is taken like ``quantile_cont`` (numpy's linear interpolation between the
order statistics of ranks ⌊h⌋ and ⌊h⌋ + 1, h = (n − 1)·q), replacing each order
statistic by its bucket's representative. Both are within α of the true ones and the
interpolation is a convex combination, so for positive data the result is within
α·(exact value) of the exact percentile: |approx − exact| ≤ α·exact. The same holds for
every rank the bootstrap reads (:func:`window`), so intervals carry the same bound.

The mean and standard deviation are those of the representatives. Each value moves by at
most α·v, so the mean by at most α·mean; the (population) standard deviation is a norm of
the centred values, which moves by at most the norm of the moves: |Δstd| ≤ α·√(mean² +
std²), i.e. within α of the root mean square (relative to std itself, α·√(1 + 1/cv²)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from analytics.stats.percentiles import SortedWindow

RELATIVE_ERROR = 0.0005  # α: 0.05 %, about 1,000 buckets per factor e of range
GAMMA = (1.0 + RELATIVE_ERROR) / (1.0 - RELATIVE_ERROR)
LOG_GAMMA = math.log(GAMMA)
ZERO_BUCKET = -1_000_000_000  # values ≤ 0; far below any ceil(ln v / ln γ) of a double


@dataclass(frozen=True, slots=True)
class Histogram:
    """Ascending bucket ids and their counts (one metric of one group)."""

    buckets: npt.NDArray[np.int64]
    counts: npt.NDArray[np.int64]

    @property
    def n(self) -> int:
        """Number of values."""
        return int(self.counts.sum())

    def representatives(self) -> npt.NDArray[np.float64]:
        """The value standing for each bucket (0 for the ≤ 0 bucket)."""
        reps = 2.0 * np.exp(self.buckets.astype(np.float64) * LOG_GAMMA) / (GAMMA + 1.0)
        reps[self.buckets == ZERO_BUCKET] = 0.0
        return reps

    def mean_std(self) -> tuple[float, float]:
        """Mean and population standard deviation of the representatives (module doc:
        the mean is within α of the exact one, the deviation within α·√(mean² + std²))."""
        reps = self.representatives()
        n = self.n
        mean = float((reps * self.counts).sum() / n)
        variance = float((self.counts * (reps - mean) ** 2).sum() / n)
        return mean, math.sqrt(variance)

    def order_statistics(self, ranks: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """Approximate values of the given 0-based ranks (each clipped to [0, n − 1])."""
        ends = np.cumsum(self.counts)  # rank r is in the first bucket whose end exceeds r
        index = np.searchsorted(ends, np.clip(ranks, 0, ends[-1] - 1), side="right")
        return self.representatives()[index]

    def quantiles(self, qs: list[float]) -> list[float]:
        """Type-7 quantiles at ``qs`` (see module doc for the error bound)."""
        n = self.n
        out = []
        for q in qs:
            h = (n - 1) * q
            k = math.floor(h)
            low, high = self.order_statistics(np.array([k, min(k + 1, n - 1)], dtype=np.int64))
            out.append(float(low + (h - k) * (high - low)))
        return out

    def window(self, q: float, half_width: int) -> SortedWindow:
        """Approximate sorted values around rank q·(n − 1), for the bootstrap."""
        n = self.n
        centre = math.floor((n - 1) * q)
        start = max(0, centre - half_width)
        stop = min(n, centre + half_width + 2)
        ranks = np.arange(start, stop, dtype=np.int64)
        return SortedWindow(n, start, tuple(float(v) for v in self.order_statistics(ranks)))
