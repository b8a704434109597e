"""Chart data of a stored run against numpy: the TTFT CDF, the ITL histogram and the
outcomes over time."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pytest

from analytics.report.plots import CDF_POINTS, ITL_BINS, TIME_BUCKETS, plot_data
from analytics.store.db import connect
from tests.support.analytics_builders import (
    MS,
    S,
    failed_result,
    ok_result,
    scenario,
    store_run,
    ttft_ms,
)
from workers.client.errors import ErrorClass
from workers.client.result import RequestResult


@pytest.fixture
def run(tmp_path: Path) -> tuple[duckdb.DuckDBPyConnection, dict[str, list[RequestResult]]]:
    """Two providers over 60 s; 'slow' rate-limits in the run's second half."""
    rng = np.random.default_rng(4)
    results: dict[str, list[RequestResult]] = {}
    for name, ttft in (("fast", 50.0), ("slow", 200.0)):
        results[name] = [
            ok_result(
                10 * S + i * 100 * MS,
                float(rng.gamma(4.0, ttft / 4)),
                rng.uniform(1.0, 30.0, size=int(rng.integers(1, 9))).tolist(),
            )
            for i in range(300)
        ]
    results["slow"] += [
        failed_result(40 * S + i * 50 * MS, ErrorClass.HTTP_429) for i in range(400)
    ]
    con = connect(tmp_path / "plots.duckdb")
    spec = scenario([{"name": name, "kind": "simulated"} for name in results])
    store_run(con, "run", spec, {(name, 0, "local"): rs for name, rs in results.items()})
    return con, results


def test_ttft_cdf_is_the_quantile_function_of_each_group(
    run: tuple[duckdb.DuckDBPyConnection, dict[str, list[RequestResult]]],
) -> None:
    con, results = run
    cdfs = {c["provider"]: c for c in plot_data(con, "run")["ttft_cdf"]}
    assert set(cdfs) == {"fast", "slow"}
    for name, cdf in cdfs.items():
        values = [ttft_ms(r) for r in results[name] if r.ok]
        assert cdf["n"] == len(values) == 300
        assert len(cdf["fractions"]) == len(cdf["ttft_ms"]) == CDF_POINTS
        assert cdf["fractions"][0] == 0 and cdf["fractions"][-1] == 1
        assert cdf["ttft_ms"] == pytest.approx(
            np.percentile(values, np.array(cdf["fractions"]) * 100)
        )
        assert cdf["ttft_ms"] == sorted(cdf["ttft_ms"])


def test_itl_histogram_counts_every_gap_once_on_shared_log_bins(
    run: tuple[duckdb.DuckDBPyConnection, dict[str, list[RequestResult]]],
) -> None:
    con, results = run
    hist = plot_data(con, "run")["itl_histogram"]
    gaps = {
        name: [g / MS for r in rs if r.ok for g in r.itl_gaps()] for name, rs in results.items()
    }
    every = [g for values in gaps.values() for g in values]
    edges = hist["edges_ms"]
    assert len(edges) == ITL_BINS + 1
    assert edges[0] == pytest.approx(min(every)) and edges[-1] == pytest.approx(max(every))
    ratios = np.array(edges[1:]) / np.array(edges[:-1])
    assert ratios == pytest.approx(np.full(ITL_BINS, ratios[0]))  # log-spaced
    for name, values in gaps.items():
        counts = hist["counts"][name]
        assert sum(counts) == len(values)
        # Each bin holds the gaps between its edges (the last one includes the maximum).
        expected, _ = np.histogram(values, bins=edges)
        assert np.abs(np.array(counts) - expected).sum() <= 2  # edges are floats: a gap may tie


def test_errors_over_time_buckets_outcomes_by_send_time(
    run: tuple[duckdb.DuckDBPyConnection, dict[str, list[RequestResult]]],
) -> None:
    con, results = run
    data = plot_data(con, "run")["errors_over_time"]
    sends = [r.sent for rs in results.values() for r in rs]
    assert data["duration_s"] == pytest.approx((max(sends) - min(sends)) / S, abs=1e-3)
    counts = data["counts"]
    assert set(counts) == {"ok", "http_429"}
    assert all(len(c) == TIME_BUCKETS for c in counts.values())
    assert sum(counts["ok"]) == 600 and sum(counts["http_429"]) == 400
    # The 429s were all sent after t = 30 s of a ~50 s run: none in the first half.
    assert sum(counts["http_429"][: TIME_BUCKETS // 2]) == 0
    assert sum(counts["ok"][: TIME_BUCKETS // 2]) > 0


def test_a_run_without_records_has_empty_chart_data(tmp_path: Path) -> None:
    con = connect(tmp_path / "empty.duckdb")
    store_run(con, "empty", scenario([{"name": "a", "kind": "simulated"}]), {("a", 0, "local"): []})
    data = plot_data(con, "empty")
    assert data["ttft_cdf"] == []
    assert data["itl_histogram"] == {"edges_ms": [], "counts": {}}
    assert data["errors_over_time"]["counts"] == {}
