"""Bootstrap intervals on report rows: they cover the true percentile of a known
distribution at the stated rate, and the narrow windows SQL or stored histograms supply
give the intervals a bootstrap over every value would."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest

from analytics.report.build import summary_rows
from analytics.stats.confidence import (
    CI_METRICS,
    PERCENTILE_METRICS,
    bootstrap_rows,
    flag_low_samples,
)
from analytics.stats.percentiles import (
    CONFIDENCE,
    SortedWindow,
    bootstrap_quantile,
    percentile_interval,
    stable_seed,
    type7,
)
from analytics.stats.sketch import LOG_GAMMA, RELATIVE_ERROR, Histogram
from analytics.store.db import connect
from tests.support.analytics_builders import MS, S, ok_result, scenario, store_run, ttft_ms

# Lognormal(mu, sigma) TTFTs: the q-quantile is exp(mu + sigma * z_q).
MU, SIGMA = 4.6, 0.5
Z = {0.5: 0.0, 0.99: 2.3263478740408408}


def _row(stage: int, values: np.ndarray) -> dict[str, Any]:
    """A summary row with exact TTFT percentiles of ``values`` and no other metric."""
    ordered = np.sort(values).tolist()
    row: dict[str, Any] = {"stage": stage, "provider": "p", "region": "r"}
    for metric in PERCENTILE_METRICS:
        row[f"{metric}_n"] = 0
        for label in ("p50", "p90", "p95", "p99", "p999"):
            row[f"{metric}_{label}_ms"] = None
    row["ttft_n"] = len(ordered)
    row["ttft_p50_ms"] = type7(ordered, 0.5)
    row["ttft_p99_ms"] = type7(ordered, 0.99)
    return row


def _histogram(values: np.ndarray) -> Histogram:
    """The log-bucketed histogram of positive values (analytics/stats/sketch.py's buckets)."""
    buckets, counts = np.unique(
        np.ceil(np.log(values) / LOG_GAMMA).astype(np.int64), return_counts=True
    )
    return Histogram(buckets, counts.astype(np.int64))


def test_flags_percentiles_the_sample_cannot_support() -> None:
    row: dict[str, Any] = {
        "ttft_n": 999,
        "ttft_p50_ms": 1.0,
        "ttft_p99_ms": 2.0,
        "ttft_p999_ms": 3.0,
    }
    row |= {"itl_n": 1000, "itl_p99_ms": 1.0, "itl_p999_ms": None}
    # 10 / (1 - q): p99 needs 1,000 samples; a missing figure is never flagged.
    assert flag_low_samples(row) == ["ttft_p99_ms", "ttft_p999_ms"]
    assert flag_low_samples({"e2e_n": None, "e2e_p50_ms": 5.0}) == ["e2e_p50_ms"]


def test_intervals_cover_the_true_percentile_at_the_stated_rate() -> None:
    """120 independent samples of 1,000 lognormal TTFTs, fixed seeds: the 95 % intervals
    of p50 and p99 each miss the true quantile about 6 times. The bound allows for chance
    (3.5 binomial standard deviations) and the percentile bootstrap's slight
    under-coverage; over-coverage is ruled out by the intervals' width."""
    rng = np.random.default_rng(2024)
    samples = [rng.lognormal(MU, SIGMA, 1000) for _ in range(120)]
    rows = [_row(stage, values) for stage, values in enumerate(samples)]
    histograms = {(stage, "p", "r"): {"ttft": _histogram(v)} for stage, v in enumerate(samples)}
    with duckdb.connect() as con:
        replicates = bootstrap_rows(con, "coverage", rows, histograms)
    assert len(replicates) == 2 * len(rows)
    for label, q in (("p50", 0.5), ("p99", 0.99)):
        truth = math.exp(MU + SIGMA * Z[q])
        lows = np.array([r[f"ttft_{label}_ci_low_ms"] for r in rows])
        highs = np.array([r[f"ttft_{label}_ci_high_ms"] for r in rows])
        coverage = float(np.mean((lows <= truth) & (truth <= highs)))
        assert coverage >= CONFIDENCE - 0.08, (label, coverage)
        # Not covering by being wide: the mean width is the asymptotic one, 2·1.96·
        # sqrt(q(1−q)/n) / f(x_q) for the lognormal density f, within a third.
        density = math.exp(-(Z[q] ** 2) / 2) / (truth * SIGMA * math.sqrt(2 * math.pi))
        expected = 2 * 1.96 * math.sqrt(q * (1 - q) / 1000) / density
        assert float(np.mean(highs - lows)) == pytest.approx(expected, rel=0.33), label


@pytest.fixture
def run(tmp_path: Path) -> tuple[duckdb.DuckDBPyConnection, dict[str, list[float]]]:
    """A stored run of two providers: 'big' (1,500 requests: p50 and p99 supported) and
    'small' (400: p50 only). Returns the connection and each provider's TTFTs (ms)."""
    rng = np.random.default_rng(9)
    results = {
        name: [
            ok_result(10 * S + i * 20 * MS, float(rng.lognormal(MU, SIGMA)), [5.0, 6.0])
            for i in range(n)
        ]
        for name, n in (("big", 1500), ("small", 400))
    }
    con = connect(tmp_path / "ci.duckdb")
    spec = scenario([{"name": name, "kind": "simulated"} for name in results])
    store_run(con, "run", spec, {(name, 0, "local"): rs for name, rs in results.items()})
    return con, {name: [ttft_ms(r) for r in rs] for name, rs in results.items()}


def test_sql_windows_give_the_intervals_of_a_bootstrap_over_every_value(
    run: tuple[duckdb.DuckDBPyConnection, dict[str, list[float]]],
) -> None:
    con, ttfts = run
    rows = summary_rows(con, "run")
    replicates = bootstrap_rows(con, "run", rows)
    by_provider = {r["provider"]: r for r in rows}
    assert by_provider["small"]["ttft_p99_ci_low_ms"] is None  # 400 < 1,000: no interval
    for provider, values in ttfts.items():
        row = by_provider[provider]
        full = SortedWindow(len(values), 0, tuple(sorted(values)))
        for label, q in (("p50", 0.5), ("p99", 0.99)):
            if provider == "small" and label == "p99":
                continue
            seed = stable_seed("run", 0, provider, "local", "ttft", label)
            expected = bootstrap_quantile(full, q, seed)
            assert replicates[(0, provider, "local", "ttft", label)] == pytest.approx(expected)
            low, high = percentile_interval(expected)
            assert row[f"ttft_{label}_ci_low_ms"] == pytest.approx(low)
            assert row[f"ttft_{label}_ci_high_ms"] == pytest.approx(high)
            assert low <= row[f"ttft_{label}_ms"] <= high
    # Every CI metric with a supported percentile got its interval.
    for metric in CI_METRICS:
        if by_provider["big"][f"{metric}_p50_ms"] is not None:
            assert by_provider["big"][f"{metric}_p50_ci_low_ms"] is not None, metric


def test_stored_histograms_give_intervals_within_their_relative_error(
    run: tuple[duckdb.DuckDBPyConnection, dict[str, list[float]]],
) -> None:
    """Same seeds, same ranks drawn: each replicate, so each endpoint, is within the
    histogram's relative error of the exact one."""
    con, ttfts = run
    exact = summary_rows(con, "run")
    bootstrap_rows(con, "run", exact)
    approx = summary_rows(con, "run")
    histograms = {
        (0, name, "local"): {"ttft": _histogram(np.array(values))} for name, values in ttfts.items()
    }
    bootstrap_rows(con, "run", approx, histograms)
    for row_exact, row_approx in zip(exact, approx, strict=True):
        for label in ("p50", "p99"):
            for end in ("low", "high"):
                column = f"ttft_{label}_ci_{end}_ms"
                if row_exact[column] is None:
                    assert row_approx[column] is None
                    continue
                assert row_approx[column] == pytest.approx(
                    row_exact[column], rel=RELATIVE_ERROR * 1.001
                )
