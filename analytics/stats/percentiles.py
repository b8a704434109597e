"""Percentile statistics: the low-sample rule and seeded bootstrap confidence intervals.

Percentiles are type 7 (linear interpolation between order statistics; numpy's and
DuckDB ``quantile_cont``'s default). The bootstrap is the ordinary percentile bootstrap
(resample n values with replacement, B times, take the 2.5 % and 97.5 % quantiles of the
resampled statistic), computed without materialising the resamples: for the sorted sample
x(1) ≤ … ≤ x(n), a resample is x(ceil(n·U_i)) for n iid uniforms U_i, and the map is
monotone, so the resample's k-th order statistic is x(ceil(n·U_(k))) with
U_(k) ~ Beta(k, n − k + 1); given U_(k) = u, the next one is u + (1 − u)·Beta(1, n − k).
That is the resampling distribution exactly, at O(B) cost instead of O(B·n), and it
needs only the sorted values near rank q·n, which SQL fetches (``bootstrap_windows.sql``).
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

QUANTILES: tuple[tuple[str, float], ...] = (
    ("p50", 0.5),
    ("p90", 0.9),
    ("p95", 0.95),
    ("p99", 0.99),
    ("p999", 0.999),
)
CI_QUANTILES: tuple[tuple[str, float], ...] = (("p50", 0.5), ("p99", 0.99))
# A percentile is "supported" when at least this many samples lie beyond it.
TAIL_SAMPLES = 10
BOOTSTRAP_RESAMPLES = 1000
CONFIDENCE = 0.95
# Ranks fetched either side of q·n, in standard deviations of the resampled rank
# (≈ sqrt(n·q·(1−q))). A draw beyond it (probability ~1e-9 per draw) is clamped to the edge.
WINDOW_SIGMAS = 6.0


def min_samples(q: float) -> int:
    """Smallest sample size whose q-quantile has TAIL_SAMPLES samples beyond it: 10/(1−q)."""
    return math.ceil(TAIL_SAMPLES / (1.0 - q) - 1e-9)


def supported(n: int, q: float) -> bool:
    """Whether a sample of ``n`` supports its q-quantile (else the figure is flagged)."""
    return n >= min_samples(q)


def type7(sorted_values: Sequence[float], q: float) -> float:
    """The q-quantile of an ascending sequence, linear interpolation (numpy's default)."""
    n = len(sorted_values)
    h = (n - 1) * q
    k = math.floor(h)
    if k + 1 >= n:
        return float(sorted_values[n - 1])
    low = sorted_values[k]
    return float(low + (h - k) * (sorted_values[k + 1] - low))


def window_half_width(n: int, q: float) -> int:
    """Ranks needed either side of the q-quantile's rank for the bootstrap (see module doc)."""
    return min(n, math.ceil(WINDOW_SIGMAS * math.sqrt(n * q * (1.0 - q))) + 3)


@dataclass(frozen=True, slots=True)
class SortedWindow:
    """Consecutive order statistics of a sample: ``values[i]`` has 0-based rank ``start + i``."""

    n: int
    start: int
    values: tuple[float, ...]

    def at(self, rank: int) -> float:
        """Value of 0-based rank ``rank``, clamped to the fetched window."""
        index = min(max(rank - self.start, 0), len(self.values) - 1)
        return self.values[index]


def window_from_split(
    n: int, below: int, lower_desc: Sequence[float], upper_asc: Sequence[float]
) -> SortedWindow:
    """Assemble a window from SQL's answer: ``below`` values lie under a pivot, the largest
    of them (descending) and the smallest of the rest (ascending)."""
    values = tuple(reversed(lower_desc)) + tuple(upper_asc)
    return SortedWindow(n, below - len(lower_desc), values)


def stable_seed(*parts: object) -> int:
    """A seed derived from ``parts`` that is the same in every process (unlike hash())."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def bootstrap_quantile(
    window: SortedWindow, q: float, seed: int, resamples: int = BOOTSTRAP_RESAMPLES
) -> list[float]:
    """``resamples`` bootstrap replicates of the q-quantile of the sample behind ``window``."""
    n = window.n
    rng = random.Random(seed)
    h = (n - 1) * q
    k = math.floor(h)  # 0-based rank of the lower order statistic
    frac = h - k
    replicates: list[float] = []
    for _ in range(resamples):
        u = rng.betavariate(k + 1, n - k)  # U_(k+1) in 1-based order-statistic terms
        low = window.at(math.ceil(n * u) - 1)
        if frac == 0.0 or k + 1 >= n:
            replicates.append(low)
            continue
        # The next uniform order statistic: u + (1 − u)·Beta(1, n − k − 1).
        m = n - k - 1
        nxt = u + (1.0 - u) * (1.0 - rng.random() ** (1.0 / m))
        high = window.at(math.ceil(n * nxt) - 1)
        replicates.append(low + frac * (high - low))
    return replicates


def percentile_interval(
    replicates: Sequence[float], confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """Equal-tailed interval of bootstrap replicates."""
    ordered = sorted(replicates)
    tail = (1.0 - confidence) / 2.0
    return type7(ordered, tail), type7(ordered, 1.0 - tail)


def ratio_interval(
    a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE
) -> tuple[float, float] | None:
    """Interval of b/a from independent replicates of a and b (None if a can be zero)."""
    if any(x <= 0 for x in a):
        return None
    return percentile_interval([y / x for x, y in zip(a, b, strict=True)], confidence)
