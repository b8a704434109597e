"""Bounded percentiles of a shard's per-request figures, for stages of any length.

A shard's health figures (schedule lag, send lag, TTFT tail; ``workers/shard/health.py``)
were Python lists of ints, about 36 bytes a request each: a 600 s stage at 500 req/s
grew the worker by ~5.45 MB/min (benchmarks/memory.py). :class:`LogHistogram` keeps
counts in log-spaced buckets instead (the DDSketch construction the reports use,
``analytics/stats/sketch.py``): a value v > 0 goes to bucket ceil(ln v / ln γ), γ = (1+α)/(1−α),
whose representative is within a factor α of every value in it, so a percentile is
within α of the exact one (α = 0.1 % here: 0.01 ms on a 10 ms lag). Values ≤ 0 share one
bucket represented by 0. Nanosecond values from 1 ns to an hour need at most ~14,000
buckets, whatever the number of requests: memory is bounded by the range, not the count.
"""

from __future__ import annotations

import math

__all__ = ["ALPHA", "LogHistogram"]

ALPHA = 0.001
_GAMMA = (1 + ALPHA) / (1 - ALPHA)
_LN_GAMMA = math.log(_GAMMA)


class LogHistogram:
    """Counts of values in log buckets; percentiles within ``ALPHA`` of the exact ones."""

    __slots__ = ("_counts", "count", "max", "min")

    def __init__(self) -> None:
        self._counts: dict[int, int] = {}
        self.count = 0
        self.min: int | None = None
        self.max: int | None = None

    def add(self, value: int) -> None:
        """Count one value."""
        key = math.ceil(math.log(value) / _LN_GAMMA) if value > 0 else _ZERO
        self._counts[key] = self._counts.get(key, 0) + 1
        self.count += 1
        if self.min is None or value < self.min:
            self.min = value
        if self.max is None or value > self.max:
            self.max = value

    def copy(self) -> LogHistogram:
        """An independent histogram with the same counts."""
        twin = LogHistogram()
        twin._counts = dict(self._counts)
        twin.count, twin.min, twin.max = self.count, self.min, self.max
        return twin

    def __len__(self) -> int:
        return self.count

    def percentile(self, q: float) -> float:
        """Linear-interpolated percentile (numpy's default rule) over bucket
        representatives; the exact maximum for q = 1; 0.0 when empty."""
        if not self.count:
            return 0.0
        if q >= 1.0:
            return float(self.max or 0)
        position = (self.count - 1) * q
        low = int(position)
        low_value = self._rank(low)
        high_value = self._rank(min(low + 1, self.count - 1))
        return low_value + (high_value - low_value) * (position - low)

    def count_at_least(self, threshold: float) -> int:
        """How many values are at or above ``threshold`` (to the bucket's precision)."""
        return sum(n for key, n in self._counts.items() if _value(key) >= threshold * (1 - ALPHA))

    def _rank(self, rank: int) -> float:
        seen = 0
        for key in sorted(self._counts):
            seen += self._counts[key]
            if seen > rank:
                return _value(key)
        return float(self.max or 0)  # pragma: no cover - rank < count


_ZERO = -(2**62)  # the bucket of values ≤ 0, below every real bucket


def _value(key: int) -> float:
    """A bucket's representative: within ``ALPHA`` of every value in it."""
    return 0.0 if key == _ZERO else 2 * _GAMMA**key / (_GAMMA + 1)
