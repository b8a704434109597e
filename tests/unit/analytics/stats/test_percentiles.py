"""The percentile statistics: type-7 quantiles, the low-sample rule, and a bootstrap that
draws order statistics instead of resamples yet has the resampling distribution."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest

from analytics.stats.percentiles import (
    QUANTILES,
    SortedWindow,
    bootstrap_quantile,
    min_samples,
    percentile_interval,
    ratio_interval,
    stable_seed,
    supported,
    type7,
    window_from_split,
    window_half_width,
)
from tests.conftest import REPO


def test_type7_is_numpys_linear_percentile() -> None:
    rng = np.random.default_rng(3)
    for n in (1, 2, 3, 10, 97, 1000):
        values = np.sort(rng.exponential(10.0, n))
        for q in (0.0, 0.001, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0):
            assert type7(values.tolist(), q) == pytest.approx(np.percentile(values, 100 * q))


def test_low_sample_rule_needs_ten_samples_beyond_the_percentile() -> None:
    # n >= 10 / (1 - q), by hand: p50 needs 20, p90 100, p95 200, p99 1,000, p99.9 10,000.
    assert [min_samples(q) for _, q in QUANTILES] == [20, 100, 200, 1000, 10000]
    for _, q in QUANTILES:
        assert supported(min_samples(q), q)
        assert not supported(min_samples(q) - 1, q)


def _full(values: np.ndarray) -> SortedWindow:
    return SortedWindow(len(values), 0, tuple(float(v) for v in values))


@pytest.mark.parametrize("q", [0.5, 0.9, 0.99])
def test_bootstrap_has_the_distribution_of_naive_resampling(q: float) -> None:
    """The order-statistic draws against numpy resampling the sample B times."""
    rng = np.random.default_rng(11)
    values = np.sort(rng.lognormal(4.0, 0.6, 1000))
    ours = np.array(bootstrap_quantile(_full(values), q, seed=5, resamples=4000))
    naive = np.percentile(rng.choice(values, (4000, values.size)), 100 * q, axis=1)
    spread = naive.std()
    # Independent Monte Carlo draws of one distribution: a few standard errors apart at most.
    assert ours.mean() == pytest.approx(naive.mean(), abs=0.15 * spread)
    assert ours.std() == pytest.approx(spread, rel=0.15)
    for tail in (2.5, 97.5):
        assert np.percentile(ours, tail) == pytest.approx(
            np.percentile(naive, tail), abs=0.3 * spread
        )


@pytest.mark.parametrize(("n", "q"), [(40, 0.5), (1000, 0.5), (1000, 0.99), (20000, 0.999)])
def test_a_window_of_the_needed_ranks_gives_the_full_samples_replicates(n: int, q: float) -> None:
    """What SQL fetches (window_half_width ranks either side) is all the bootstrap reads."""
    values = np.sort(np.random.default_rng(n).gamma(2.0, 30.0, n))
    half = window_half_width(n, q)
    centre = math.floor((n - 1) * q)
    start = max(0, centre - half)
    window = SortedWindow(n, start, tuple(values[start : centre + half + 2].tolist()))
    assert len(window.values) < n or n <= 2 * half + 2
    seed = stable_seed("run", n, q)
    assert bootstrap_quantile(window, q, seed) == bootstrap_quantile(_full(values), q, seed)


def test_window_from_split_puts_each_value_at_its_rank() -> None:
    values = [float(v) for v in range(100, 200)]  # value = 100 + 0-based rank
    below = 37  # values under some pivot
    lower_desc = sorted(values[:below], reverse=True)[:5]
    upper_asc = values[below : below + 4]
    window = window_from_split(len(values), below, lower_desc, upper_asc)
    for rank in range(below - 5, below + 4):
        assert window.at(rank) == 100 + rank
    # Ranks beyond the fetched window are clamped to its edges.
    assert window.at(0) == 100 + below - 5
    assert window.at(99) == 100 + below + 3


def test_bootstrap_is_reproducible_by_seed() -> None:
    window = _full(np.sort(np.random.default_rng(1).normal(50, 5, 500)))
    first = bootstrap_quantile(window, 0.5, seed=7, resamples=200)
    assert first == bootstrap_quantile(window, 0.5, seed=7, resamples=200)
    assert first != bootstrap_quantile(window, 0.5, seed=8, resamples=200)


def test_percentile_interval_is_equal_tailed() -> None:
    replicates = [float(v) for v in reversed(range(1001))]  # their order must not matter
    assert percentile_interval(replicates) == pytest.approx((25.0, 975.0))
    assert percentile_interval(replicates, confidence=0.5) == pytest.approx((250.0, 750.0))


def test_ratio_interval_of_replicates() -> None:
    a = [10.0, 20.0, 40.0]
    assert ratio_interval(a, [15.0, 30.0, 60.0]) == (1.5, 1.5)
    # b/a pairs replicate by replicate: 2, 1, 0.5.
    low, high = ratio_interval(a, [20.0, 20.0, 20.0], confidence=1.0) or (0, 0)
    assert (low, high) == (0.5, 2.0)
    assert ratio_interval([10.0, 0.0], [1.0, 1.0]) is None


def test_stable_seed_is_the_same_in_another_process() -> None:
    """Unlike hash(), so a report printed twice, anywhere, has the same intervals."""
    parts = ("run-1", 0, "api", "eu", "ttft", "p99")
    code = f"from analytics.stats.percentiles import stable_seed; print(stable_seed(*{parts!r}))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
        timeout=60,
    )
    assert int(done.stdout) == stable_seed(*parts)
    assert stable_seed(*parts) != stable_seed(*parts[:-1], "p50")
