"""The report of a large run from stored per-shard aggregates, against the exact report.

Forcing ``ExactLimits(0, 0)`` makes a small run take the large-run path, so both paths
can be compared on the same records: counts, rates, goodput and cost must be equal;
every percentile, interval and CDF point within the documented relative error.
"""

from __future__ import annotations

import math
from pathlib import Path

import duckdb
import numpy as np
import pytest

from analytics.render.html_report import render_html
from analytics.render.markdown import render_markdown
from analytics.report.build import build_report
from analytics.report.stored import ExactLimits
from analytics.stats.sketch import RELATIVE_ERROR, ZERO_BUCKET, Histogram
from analytics.store.db import SCHEMA_VERSION, connect
from tests.support.builders import MS, REPORT_SCENARIO, S, failed_result, ok_result, store_run
from workers.client.errors import ErrorClass

FORCE = ExactLimits(ok_requests=0, itl_gaps=0)
PERCENTILE_PREFIXES = ("ttft", "itl", "tpot", "e2e", "ttft_intent", "e2e_intent")


def _close(approx: float | None, exact: float | None) -> bool:
    if approx is None or exact is None:
        return approx is exact
    return abs(approx - exact) <= RELATIVE_ERROR * abs(exact) + 1e-9


@pytest.fixture
def two_stage_run(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    """Two providers × two stages, lognormal TTFT and gaps (some zero), with failures."""
    rng = np.random.default_rng(11)
    shards = {}
    for provider in ("api", "gpu"):
        for stage in (0, 1):
            results = [
                ok_result(
                    10 * S + i * 40 * MS,
                    float(rng.lognormal(4.6 + stage, 0.6)),
                    [0.0, *rng.lognormal(2.0, 0.5, size=int(rng.integers(1, 20)))],
                )
                for i in range(1500)
            ]
            results += [failed_result(10 * S + i * MS, ErrorClass.HTTP_5XX) for i in range(15)]
            shards[(provider, stage)] = results
    con = connect(tmp_path / "h.duckdb")
    store_run(con, "run", REPORT_SCENARIO, shards, load_kind="open")
    return con


def test_histogram_report_matches_the_exact_one(two_stage_run: duckdb.DuckDBPyConnection) -> None:
    exact = build_report(two_stage_run, "run")
    approx = build_report(two_stage_run, "run", exact_limits=FORCE)
    assert exact.percentiles == {"method": "exact"}
    assert approx.percentiles["method"] == "log_histogram"
    assert approx.percentiles["relative_error"] == RELATIVE_ERROR
    assert len(exact.stages) == len(approx.stages) == 4
    for e, a in zip(exact.stages, approx.stages, strict=True):
        assert list(e) == list(a)  # same columns in the same order
        for column, value in e.items():
            if column.endswith("_std_ms"):
                # Within α of the root mean square (analytics/stats/sketch.py).
                mean = e[column.replace("_std_", "_mean_")]
                if value is None:
                    assert a[column] is None, column
                else:
                    bound = RELATIVE_ERROR * math.hypot(mean, value) + 1e-9
                    assert abs(a[column] - value) <= bound, (column, a[column], value)
            elif column.endswith("_ms") or column == "decode_tok_s_p50":
                assert _close(a[column], value), (column, a[column], value)
            elif isinstance(value, float):
                assert a[column] == pytest.approx(value, rel=1e-9), column
            else:
                assert a[column] == value, column
    assert exact.pareto == approx.pareto or len(exact.pareto) == len(approx.pareto)


def test_histogram_charts_match_the_exact_ones(two_stage_run: duckdb.DuckDBPyConnection) -> None:
    exact = build_report(two_stage_run, "run").plots
    approx = build_report(two_stage_run, "run", exact_limits=FORCE).plots
    assert approx["errors_over_time"] == exact["errors_over_time"]
    for metric in ("ttft", "itl"):
        assert len(exact[f"{metric}_cdf"]) == len(approx[f"{metric}_cdf"]) == 4
        for e, a in zip(exact[f"{metric}_cdf"], approx[f"{metric}_cdf"], strict=True):
            assert (e["stage"], e["provider"], e["n"]) == (a["stage"], a["provider"], a["n"])
            values = zip(a[f"{metric}_ms"], e[f"{metric}_ms"], strict=True)
            assert all(_close(x, y) for x, y in values), metric
    e_hist, a_hist = exact["itl_histogram"], approx["itl_histogram"]
    for provider, counts in e_hist["counts"].items():
        assert sum(a_hist["counts"][provider]) == sum(counts)
    assert _close(a_hist["edges_ms"][0], e_hist["edges_ms"][0])
    assert _close(a_hist["edges_ms"][-1], e_hist["edges_ms"][-1])


@pytest.mark.parametrize("q", [0.0, 0.01, 0.5, 0.9, 0.99, 0.999, 1.0])
def test_histogram_quantile_error_bound_against_numpy(q: float) -> None:
    rng = np.random.default_rng(3)
    values = np.concatenate([rng.lognormal(3.0, 1.2, 50_000), np.zeros(50)])
    buckets = np.where(
        values > 0,
        np.ceil(
            np.log(np.where(values > 0, values, 1.0))
            / math.log((1 + RELATIVE_ERROR) / (1 - RELATIVE_ERROR))
        ),
        ZERO_BUCKET,
    ).astype(np.int64)
    ids, counts = np.unique(buckets, return_counts=True)
    (approx,) = Histogram(ids, counts.astype(np.int64)).quantiles([q])
    exact = float(np.percentile(values, q * 100))
    assert abs(approx - exact) <= RELATIVE_ERROR * exact + 1e-12


def test_histogram_mean_and_std_error_bounds_against_numpy() -> None:
    rng = np.random.default_rng(5)
    # Narrow (cv 2 %) and wide lognormals, zeros included: the deviation's bound is
    # relative to the root mean square, which a narrow sample makes matter.
    for values in (
        np.concatenate([rng.normal(100.0, 2.0, 20_000), np.zeros(10)]),
        rng.lognormal(3.0, 1.2, 50_000),
    ):
        gamma = (1 + RELATIVE_ERROR) / (1 - RELATIVE_ERROR)
        positive = np.where(values > 0, values, 1.0)
        buckets = np.where(values > 0, np.ceil(np.log(positive) / math.log(gamma)), ZERO_BUCKET)
        ids, counts = np.unique(buckets.astype(np.int64), return_counts=True)
        mean, std = Histogram(ids, counts.astype(np.int64)).mean_std()
        exact_mean, exact_std = float(np.mean(values)), float(np.std(values))
        assert abs(mean - exact_mean) <= RELATIVE_ERROR * exact_mean
        assert abs(std - exact_std) <= RELATIVE_ERROR * math.hypot(exact_mean, exact_std)


def test_settled_shards_store_aggregates_and_migration_back_fills(tmp_path: Path) -> None:
    con = connect(tmp_path / "m.duckdb")
    results = [ok_result(10 * S + i * S, 100.0, [1.0, 2.0]) for i in range(30)]
    store_run(con, "run", REPORT_SCENARIO, {("api", 0): results})
    stored = con.execute("SELECT requests, ok FROM shard_summaries").fetchall()
    assert stored == [(30, 30)]
    # A v2 file (no aggregates yet) is back-filled when opened.
    con.execute("DROP TABLE shard_summaries")
    con.execute("DROP TABLE shard_errors")
    con.execute("DROP TABLE shard_histograms")
    con.execute("DROP TABLE shard_error_messages")  # added by v8
    con.execute("ALTER TABLE shard_attempts DROP COLUMN health")  # added by v4
    # v7: the stored plan and the views reading the stage's level.
    con.execute("DROP VIEW stage_summary")
    con.execute("ALTER VIEW stage_summary_measured RENAME TO stage_summary")
    for column in ("stage_concurrency", "plan_position", "spec"):
        con.execute(f"ALTER TABLE shards DROP COLUMN {column}")
    con.execute("DELETE FROM schema_version WHERE version >= 3")
    con.close()
    con = connect(tmp_path / "m.duckdb")
    assert con.execute("SELECT max(version) FROM schema_version").fetchone() == (SCHEMA_VERSION,)
    assert con.execute("SELECT requests, ok FROM shard_summaries").fetchall() == stored
    report = build_report(con, "run", exact_limits=FORCE)
    assert report.percentiles["method"] == "log_histogram"
    assert report.stages[0]["itl_n"] == 60


def test_text_formats_disclose_the_method(two_stage_run: duckdb.DuckDBPyConnection) -> None:
    approx = build_report(two_stage_run, "run", exact_limits=FORCE)
    assert "within 0.05% of the exact value" in render_markdown(approx)
    assert "within 0.05% of the exact value" in render_html(approx)
    assert "Percentiles:" not in render_markdown(build_report(two_stage_run, "run"))
