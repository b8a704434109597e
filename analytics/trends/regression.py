"""Is the latest run worse than the runs before it? The regression verdict of a trend.

A metric of one provider × region × stage has a value per run, and some runs also know
how precise their own value is (a bootstrap interval for a TTFT percentile, the binomial
error of an error rate). The latest run is compared with the *trailing window*: the
``window`` runs before it that have a value. Each value is the provider's true level of
that run plus the run's own sampling error (standard error ``se_i``, from its 95 %
interval as ``(high − low) / (2 · 1.96)``), and the true level itself moves from run to
run (between-run variance ``τ²``). The difference ``d = latest − mean(window)`` then has
variance::

    var(d) = se_latest² + Σ se_i² / k²  +  τ² · (1 + 1/k)

with ``τ² = max(0, s² − mean(se_i²))`` estimated from the window's spread ``s²`` (sample
variance, k ≥ 2). Without within-run errors (throughput, cost) the sampling terms are 0
and ``τ²`` is ``s²``: the classic prediction interval ``mean ± t · s · √(1 + 1/k)`` of one
more run. The critical value is Student's ``t`` with ``k − 1`` degrees of freedom when
``τ²`` is estimated from the window, the normal 1.96 when only within-run errors count.

The band ``mean ± critical · √var(d)`` is the window's 95 % interval for the next run.
The latest run is a **regression** when it lies outside the band in the harmful
direction (TTFT, error rate and cost up; throughput down) *and* the change is at least
``min_change`` of the window mean (10 % by default; for an error rate at least one
percentage point as well), so that a statistically clear but tiny change pages nobody.
A metric is *not judged* when there is no earlier run, or only one and the metric has
no within-run interval (nothing would say how much it varies).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

CONFIDENCE = 0.95
Z_95 = 1.959963984540054  # two-sided 95 % normal quantile
DEFAULT_WINDOW = 5
DEFAULT_MIN_CHANGE = 0.10
# An error rate must move by at least this much (absolute) to count, whatever its level.
ERROR_RATE_FLOOR = 0.01

# Two-sided 95 % Student t quantiles t(0.975, df) for df = 1..30; above, the
# Cornish-Fisher expansion (Abramowitz & Stegun 26.7.5) is within 1e-4.
_T_975 = (
    12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
    2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
    2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
)  # fmt: skip


def t_975(df: int) -> float:
    """Student's t 97.5 % quantile with ``df`` degrees of freedom (df ≥ 1)."""
    if df < 1:
        raise ValueError("t needs at least one degree of freedom")
    if df <= len(_T_975):
        return _T_975[df - 1]
    z = Z_95
    return (
        z
        + (z**3 + z) / (4 * df)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3)
    )


def se_from_interval(low: float | None, high: float | None) -> float | None:
    """The standard error a 95 % interval implies, or None without one."""
    if low is None or high is None:
        return None
    return max(0.0, high - low) / (2 * Z_95)


def rate_se(errors: int, requests: int) -> float | None:
    """Standard error of an error rate (Agresti-Coull: two errors and two successes
    added, so that a run without errors still has a non-zero error)."""
    if requests <= 0:
        return None
    adjusted = (errors + 2) / (requests + 4)
    return math.sqrt(adjusted * (1 - adjusted) / (requests + 4))


@dataclass(frozen=True, slots=True)
class Point:
    """One run's value of a metric and, if the run knows it, its standard error."""

    value: float
    se: float | None = None


@dataclass(frozen=True, slots=True)
class Judgement:
    """The verdict on the latest value against the trailing window."""

    judged: bool
    regression: bool
    window_runs: int
    window_mean: float | None = None
    band_low: float | None = None
    band_high: float | None = None
    change: float | None = None  # latest − mean
    relative_change: float | None = None  # (latest − mean) / mean; None when mean is 0
    reason: str = ""  # why not judged, else ""


def judge(
    latest: Point,
    window: Sequence[Point],
    *,
    higher_is_worse: bool,
    min_change: float = DEFAULT_MIN_CHANGE,
    absolute_floor: float = 0.0,
) -> Judgement:
    """Whether ``latest`` is a regression against ``window`` (oldest first; the module
    docstring says how). ``absolute_floor`` is the smallest change that counts whatever
    the window's level (an error rate's percentage point)."""
    k = len(window)
    if k == 0:
        return Judgement(False, False, 0, reason="no earlier run")
    values = [p.value for p in window]
    mean = math.fsum(values) / k
    within = latest.se is not None and all(p.se is not None for p in window)
    if k == 1 and not within:
        return Judgement(
            False,
            False,
            1,
            window_mean=mean,
            reason="one earlier run, and no within-run interval to say how much it varies",
        )
    sampling = 0.0
    mean_sq_se = 0.0
    if within:
        errors = [p.se or 0.0 for p in window]
        sampling = (latest.se or 0.0) ** 2 + math.fsum(e * e for e in errors) / k**2
        mean_sq_se = math.fsum(e * e for e in errors) / k
    critical = Z_95
    between = 0.0
    if k >= 2:
        spread = math.fsum((v - mean) ** 2 for v in values) / (k - 1)
        between = max(0.0, spread - mean_sq_se)
        if between > 0 or not within:
            critical = t_975(k - 1)
    half = critical * math.sqrt(sampling + between * (1 + 1 / k))
    low, high = mean - half, mean + half
    change = latest.value - mean
    relative = change / mean if mean != 0 else None
    harmful = change > 0 if higher_is_worse else change < 0
    outside = latest.value > high if higher_is_worse else latest.value < low
    floor = max(absolute_floor, min_change * abs(mean))
    regression = harmful and outside and abs(change) >= floor and abs(change) > 0
    return Judgement(True, regression, k, mean, low, high, change, relative)
