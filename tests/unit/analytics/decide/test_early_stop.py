"""``stop_when``'s quantile interval: order-statistic ranks and the verdict."""

from __future__ import annotations

import numpy as np
import pytest

from analytics.decide.early_stop import QuantileInterval, interval_ranks, tight_enough


def test_ranks_bracket_the_quantile_and_close_only_with_enough_samples() -> None:
    low, high = interval_ranks(1000, 0.5, 0.95) or (0, 0)
    assert (low, high) == (469, 532)  # 500 ± 1.96·√250 = 500 ± 31.0, the upper one past it
    assert interval_ranks(100, 0.99, 0.95) is None  # not past the p99 on the upper side
    assert interval_ranks(1000, 0.99, 0.95) is not None
    assert interval_ranks(1, 0.5, 0.95) is None


def test_the_interval_covers_the_true_quantile_about_as_often_as_promised() -> None:
    rng = np.random.default_rng(3)
    n, q, covered, trials = 400, 0.9, 0, 400
    true = float(np.quantile(rng.lognormal(0, 0.5, 2_000_000), q))
    for _ in range(trials):
        values = np.sort(rng.lognormal(0, 0.5, n))
        ranks = interval_ranks(n, q, 0.95)
        assert ranks is not None
        covered += values[ranks[0] - 1] <= true <= values[ranks[1] - 1]
    assert 0.92 <= covered / trials <= 0.99


def test_every_region_must_be_tight_and_large_enough() -> None:
    tight = QuantileInterval("eu", 500, 100.0, 97.0, 103.0)
    assert tight.relative_half_width == pytest.approx(0.03)
    wide = QuantileInterval("us", 500, 100.0, 80.0, 120.0)
    small = QuantileInterval("us", 20, 100.0, 99.0, 101.0)
    open_ended = QuantileInterval("us", 500, 100.0, 97.0, None)
    assert tight_enough([tight], 100, 0.05)
    assert not tight_enough([tight, wide], 100, 0.05)
    assert not tight_enough([tight, small], 100, 0.05)
    assert not tight_enough([tight, open_ended], 100, 0.05)
    assert not tight_enough([], 100, 0.05)
