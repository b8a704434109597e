"""Bounded percentiles of the shard health figures (workers/load/quantiles.py)."""

from __future__ import annotations

import numpy as np
import pytest

from workers.load.quantiles import ALPHA, LogHistogram


def test_percentiles_are_within_alpha_of_numpy() -> None:
    rng = np.random.default_rng(3)
    values = rng.lognormal(15, 1.2, 20_000).astype(np.int64)
    histogram = LogHistogram()
    for value in values:
        histogram.add(int(value))
    for q in (0.0, 0.1, 0.5, 0.9, 0.99, 0.999):
        exact = float(np.percentile(values, q * 100))
        assert histogram.percentile(q) == pytest.approx(exact, rel=ALPHA * 1.01)
    assert histogram.percentile(1.0) == values.max()  # the maximum is exact
    assert (histogram.min, histogram.max, len(histogram)) == (values.min(), values.max(), 20_000)


def test_memory_is_bounded_by_the_range_not_the_count() -> None:
    histogram = LogHistogram()
    for i in range(200_000):
        histogram.add(1_000_000 + i % 1000)  # a million-odd ns, 200k times
    # 1,000 distinct values within 0.1 %: about one bucket per 0.2 % of range.
    assert len(histogram._counts) < 10
    assert histogram.count == 200_000


def test_zero_and_negative_values_share_a_bucket_represented_by_zero() -> None:
    histogram = LogHistogram()
    for value in (-5, 0, 0, 10):
        histogram.add(value)
    assert histogram.percentile(0.5) == 0.0
    assert histogram.min == -5 and histogram.max == 10
    assert LogHistogram().percentile(0.99) == 0.0


def test_count_at_least_counts_the_tail() -> None:
    histogram = LogHistogram()
    for value in [100] * 99 + [5000]:
        histogram.add(value)
    assert histogram.count_at_least(histogram.percentile(0.999)) == 1
    assert histogram.count_at_least(100) == 100
