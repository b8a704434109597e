"""analytics/trends/regression.py: the trailing-window verdict against numpy's own arithmetic, the
t quantiles against the published table, and the rules that keep noise from paging."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analytics.trends.regression import (
    ERROR_RATE_FLOOR,
    Z_95,
    Point,
    judge,
    rate_se,
    se_from_interval,
    t_975,
)

# t(0.975, df) from the standard table (and the normal limit).
T_TABLE = {
    1: 12.706,
    2: 4.303,
    5: 2.571,
    10: 2.228,
    29: 2.045,
    30: 2.042,
    40: 2.021,
    60: 2.000,
    120: 1.980,
}


@pytest.mark.parametrize(("df", "expected"), sorted(T_TABLE.items()))
def test_t_quantiles_match_the_table(df: int, expected: float) -> None:
    assert t_975(df) == pytest.approx(expected, abs=1.5e-3)


def test_t_needs_a_degree_of_freedom() -> None:
    with pytest.raises(ValueError, match="degree"):
        t_975(0)
    assert t_975(10_000) == pytest.approx(Z_95, abs=1e-3)


def test_prediction_interval_without_within_run_errors_is_numpys() -> None:
    rng = np.random.default_rng(7)
    window = rng.normal(2000.0, 40.0, size=6)
    k = len(window)
    half = t_975(k - 1) * np.std(window, ddof=1) * math.sqrt(1 + 1 / k)
    mean = float(np.mean(window))
    inside = judge(
        Point(mean - 0.9 * half), [Point(float(v)) for v in window], higher_is_worse=False
    )
    assert inside.judged and not inside.regression
    assert inside.band_low == pytest.approx(mean - half)
    assert inside.band_high == pytest.approx(mean + half)
    assert inside.window_mean == pytest.approx(mean)
    # Throughput down, beyond the band and by more than 10 %: a regression.
    low = min(mean - 1.1 * half, 0.85 * mean)
    fell = judge(Point(low), [Point(float(v)) for v in window], higher_is_worse=False)
    assert fell.regression and fell.relative_change == pytest.approx(low / mean - 1)
    # The same change upwards is an improvement, never a regression.
    rose = judge(Point(2 * mean - low), [Point(float(v)) for v in window], higher_is_worse=False)
    assert rose.judged and not rose.regression


def test_within_run_errors_and_between_run_spread_add_up() -> None:
    rng = np.random.default_rng(11)
    values = rng.normal(100.0, 5.0, size=5)
    errors = np.array([1.0, 1.5, 0.8, 1.2, 1.1])
    latest_se = 1.3
    k = len(values)
    spread = np.var(values, ddof=1)
    between = max(0.0, spread - np.mean(errors**2))
    variance = latest_se**2 + np.sum(errors**2) / k**2 + between * (1 + 1 / k)
    critical = t_975(k - 1) if between > 0 else Z_95
    half = critical * math.sqrt(variance)
    window = [Point(float(v), float(e)) for v, e in zip(values, errors, strict=True)]
    verdict = judge(Point(float(np.mean(values)), latest_se), window, higher_is_worse=True)
    assert verdict.band_high - verdict.window_mean == pytest.approx(half)
    assert verdict.window_mean - verdict.band_low == pytest.approx(half)


def test_one_earlier_run_is_judged_by_the_two_runs_own_intervals() -> None:
    # Two runs' TTFT p50 with bootstrap standard errors: a two-sample z-test.
    earlier, latest = Point(20.0, 0.5), Point(25.0, 0.6)
    verdict = judge(latest, [earlier], higher_is_worse=True)
    half = Z_95 * math.sqrt(0.5**2 + 0.6**2)
    assert verdict.judged and verdict.window_runs == 1
    assert verdict.band_high == pytest.approx(20.0 + half)
    assert verdict.regression  # 25 > 20 + 1.53 and +25 % ≥ 10 %
    # A metric without within-run errors cannot be judged from one earlier run.
    blind = judge(Point(25.0), [Point(20.0)], higher_is_worse=True)
    assert not blind.judged and "one earlier run" in blind.reason
    assert not judge(Point(1.0), [], higher_is_worse=True).judged


def test_a_clear_but_small_change_pages_nobody() -> None:
    # Tight intervals: 21 is far outside the band, but only +5 %.
    window = [Point(20.0, 0.05), Point(20.01, 0.05), Point(19.99, 0.05)]
    small = judge(Point(21.0, 0.05), window, higher_is_worse=True, min_change=0.10)
    assert small.judged
    assert small.band_high is not None and small.band_high < 21.0
    assert not small.regression
    assert judge(Point(21.0, 0.05), window, higher_is_worse=True, min_change=0.04).regression


def test_an_error_rate_needs_a_percentage_point() -> None:
    # From 0 errors in 1000 to 0.6 %: outside a tight band, but under one point.
    window = [Point(0.0, rate_se(0, 1000)), Point(0.0, rate_se(0, 1000))]
    latest = Point(0.006, rate_se(6, 1000))
    verdict = judge(latest, window, higher_is_worse=True, absolute_floor=ERROR_RATE_FLOOR)
    assert not verdict.regression
    worse = judge(
        Point(0.05, rate_se(50, 1000)),
        window,
        higher_is_worse=True,
        absolute_floor=ERROR_RATE_FLOOR,
    )
    assert worse.regression and worse.change == pytest.approx(0.05)


def test_standard_errors_from_intervals_and_counts() -> None:
    assert se_from_interval(10.0, 14.0) == pytest.approx(4.0 / (2 * Z_95))
    assert se_from_interval(None, 3.0) is None
    adjusted = 7 / 104
    assert rate_se(5, 100) == pytest.approx(math.sqrt(adjusted * (1 - adjusted) / 104))
    assert rate_se(0, 0) is None
    assert rate_se(0, 50) > 0  # no error seen is still not a certainty
