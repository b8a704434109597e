"""Pairwise comparisons and the Pareto view, on rows and replicates built from known
distributions."""

from __future__ import annotations

from typing import Any

import numpy as np

from analytics.stats.compare import compare_providers, compare_runs, pareto, verdict
from analytics.stats.confidence import ReplicateKey
from analytics.stats.percentiles import SortedWindow, bootstrap_quantile, stable_seed, type7


def _side(
    provider: str, scale: float, seed: int, n: int = 2000
) -> tuple[dict[str, Any], dict[ReplicateKey, list[float]]]:
    """A row of ``provider`` (stage 0, region eu) with TTFT ~ scale·lognormal, and its
    p50/p99 bootstrap replicates."""
    values = sorted((scale * np.random.default_rng(seed).lognormal(4.0, 0.4, n)).tolist())
    window = SortedWindow(n, 0, tuple(values))
    row: dict[str, Any] = {"stage": 0, "provider": provider, "region": "eu"}
    replicates: dict[ReplicateKey, list[float]] = {}
    for label, q in (("p50", 0.5), ("p99", 0.99)):
        row[f"ttft_{label}_ms"] = type7(values, q)
        replicates[(0, provider, "eu", "ttft", label)] = bootstrap_quantile(
            window, q, stable_seed(provider, seed, label), resamples=400
        )
    return row, replicates


def test_providers_compared_per_stage_and_region_with_an_interval() -> None:
    base, base_reps = _side("base", 1.0, seed=1)
    slow, slow_reps = _side("slow", 1.5, seed=2)
    same, same_reps = _side("same", 1.0, seed=3)
    rows = [base, slow, same, {"stage": 0, "provider": "slow", "region": "us"}]
    replicates = base_reps | slow_reps | same_reps

    compared = compare_providers(rows, replicates, "base", "slow")
    assert {(r["stage"], r["region"], r["metric"]) for r in compared} == {
        (0, "eu", "ttft_p50"),
        (0, "eu", "ttft_p99"),
    }  # the us row has no counterpart of 'base'
    for row in compared:
        assert row["ratio"] == row["b_ms"] / row["a_ms"]
        assert 1.0 < row["ci_low"] <= row["ratio"] <= row["ci_high"]
        assert row["verdict"].endswith("slow is slower")

    # The same distribution, another sample: the interval contains 1.
    for row in compare_providers(rows, replicates, "base", "same"):
        assert row["ci_low"] < 1.0 < row["ci_high"], row
        assert row["verdict"].startswith("no clear difference")
    # Reversed, the slow provider's rival is faster.
    assert all(
        r["verdict"].endswith("base is faster")
        for r in compare_providers(rows, replicates, "slow", "base")
    )


def test_runs_compared_for_the_groups_both_have() -> None:
    yesterday, reps_a = _side("api", 1.0, seed=4)
    today, reps_b = _side("api", 0.8, seed=5)
    gone = {"stage": 1, "provider": "api", "region": "eu", "ttft_p50_ms": 10.0}
    rows = compare_runs("r1", [yesterday, gone], reps_a, "r2", [today], reps_b)
    assert {r["metric"] for r in rows} == {"ttft_p50", "ttft_p99"}
    for row in rows:
        assert row["provider"] == "api" and (row["a"], row["b"]) == (
            "api in run r1",
            "api in run r2",
        )
        assert row["ci_high"] < 1.0 and row["verdict"].endswith("is faster")


def test_too_few_samples_give_a_ratio_without_an_interval() -> None:
    a = {"stage": 0, "provider": "a", "region": "eu", "ttft_p50_ms": 100.0, "e2e_p99_ms": 0.0}
    b = {"stage": 0, "provider": "b", "region": "eu", "ttft_p50_ms": 150.0, "e2e_p99_ms": 5.0}
    (row,) = compare_providers([a, b], {}, "a", "b")  # a zero baseline is not compared
    assert row["ratio"] == 1.5 and row["ci_low"] is None
    assert "too few samples" in row["verdict"]
    assert verdict("a", "b", "p50 TTFT", 1.5, None) == row["verdict"]


def test_pareto_marks_the_points_nothing_beats_on_both() -> None:
    def point(provider: str, cost: float | None, p99: float | None, **extra: Any) -> dict[str, Any]:
        return {
            "provider": provider,
            "stage": 0,
            "region": "eu",
            "concurrency": 1,
            "cost_per_mtok_output": cost,
            "ttft_p99_ms": p99,
            **extra,
        }

    rows = [
        point("cheap", 1.0, 900.0),
        point("fast", 5.0, 100.0, low_sample=["ttft_p99_ms"]),
        point("middle", 2.0, 300.0),
        point("dominated", 3.0, 400.0),  # middle is cheaper and faster
        point("tie", 2.0, 300.0),  # equal to middle: neither beats the other
        point("unpriced", None, 50.0),
    ]
    frontier = pareto(rows)
    assert [p["provider"] for p in frontier] == ["cheap", "middle", "tie", "dominated", "fast"]
    marked = {p["provider"]: p["pareto"] for p in frontier}
    assert marked == {"cheap": True, "middle": True, "tie": True, "dominated": False, "fast": True}
    assert [p["provider"] for p in frontier if p["ttft_p99_low_sample"]] == ["fast"]
