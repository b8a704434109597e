"""Pairwise comparisons (two providers of a run, or two runs) and the cost-vs-p99 Pareto view.

A comparison divides B's percentile by A's, per stage and region both measured, with a
95 % interval from the two sides' independent bootstrap replicates
(``analytics.stats.percentiles``), and says it in one sentence. An interval that contains
1 is "no clear difference".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from analytics.stats.confidence import ReplicateKey
from analytics.stats.percentiles import ratio_interval

COMPARED = (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "E2E"), ("ttft_intent", "TTFT from intent"))
COMPARED_QUANTILES = ("p50", "p99")

Side = tuple[str, Mapping[tuple[int, str, str], dict[str, Any]], Mapping[ReplicateKey, list[float]]]


def verdict(a: str, b: str, what: str, ratio: float, ci: tuple[float, float] | None) -> str:
    """One plain sentence on B's figure relative to A's."""
    base = f"{b}'s {what} is {ratio:.2f}× {a}'s"
    if ci is None:
        return f"{base} (too few samples for a confidence interval)"
    low, high = ci
    interval = f"95 % CI {low:.2f}–{high:.2f}"
    if low > 1.0:
        return f"{base}, {interval}: {b} is slower"
    if high < 1.0:
        return f"{base}, {interval}: {b} is faster"
    return f"no clear difference: {base}, {interval}"


def _compare(
    a: Side, b: Side, keys: Sequence[tuple[tuple[int, str, str], tuple[int, str, str]]]
) -> list[dict[str, Any]]:
    name_a, rows_a, reps_a = a
    name_b, rows_b, reps_b = b
    out: list[dict[str, Any]] = []
    for key_a, key_b in keys:
        row_a, row_b = rows_a[key_a], rows_b[key_b]
        for metric, title in COMPARED:
            for label in COMPARED_QUANTILES:
                column = f"{metric}_{label}_ms"
                value_a, value_b = row_a.get(column), row_b.get(column)
                if value_a is None or value_b is None or value_a <= 0:
                    continue
                ratio = value_b / value_a
                draws_a = reps_a.get((*key_a, metric, label))
                draws_b = reps_b.get((*key_b, metric, label))
                ci = ratio_interval(draws_a, draws_b) if draws_a and draws_b else None
                out.append(
                    {
                        "stage": key_a[0],
                        "region": key_a[2],
                        "a": name_a,
                        "b": name_b,
                        "metric": f"{metric}_{label}",
                        "a_ms": value_a,
                        "b_ms": value_b,
                        "ratio": ratio,
                        "ci_low": None if ci is None else ci[0],
                        "ci_high": None if ci is None else ci[1],
                        "verdict": verdict(name_a, name_b, f"{label} {title}", ratio, ci),
                    }
                )
    return out


def compare_providers(
    rows: Sequence[dict[str, Any]],
    replicates: Mapping[ReplicateKey, list[float]],
    provider_a: str,
    provider_b: str,
) -> list[dict[str, Any]]:
    """B versus A in every stage and region of one run that both measured."""
    by_key = {(r["stage"], r["provider"], r["region"]): r for r in rows}
    keys = [
        ((stage, provider_a, region), (stage, provider_b, region))
        for stage, provider, region in by_key
        if provider == provider_a and (stage, provider_b, region) in by_key
    ]
    return _compare(
        (provider_a, by_key, replicates), (provider_b, by_key, replicates), sorted(keys)
    )


def compare_runs(
    run_a: str,
    rows_a: Sequence[dict[str, Any]],
    replicates_a: Mapping[ReplicateKey, list[float]],
    run_b: str,
    rows_b: Sequence[dict[str, Any]],
    replicates_b: Mapping[ReplicateKey, list[float]],
) -> list[dict[str, Any]]:
    """Run B versus run A for every stage × provider × region both have. Two runs that
    share none but each measured one provider and region per stage (another tool's run,
    imported, beside tokenbench's of the same endpoint) are paired stage by stage."""
    index_a = {(r["stage"], r["provider"], r["region"]): r for r in rows_a}
    index_b = {(r["stage"], r["provider"], r["region"]): r for r in rows_b}
    pairs = [(key, key) for key in sorted(set(index_a) & set(index_b))]
    if not pairs:
        pairs = _by_stage(list(index_a), list(index_b))
    out: list[dict[str, Any]] = []
    for key_a, key_b in pairs:
        same = key_a[1] == key_b[1]
        rows = _compare(
            (f"{key_a[1]} in run {run_a}", index_a, replicates_a),
            (f"{key_b[1]} in run {run_b}", index_b, replicates_b),
            [(key_a, key_b)],
        )
        for row in rows:
            row["provider"] = key_a[1] if same else f"{key_a[1]} / {key_b[1]}"
            if key_a[2] != key_b[2]:
                row["region"] = f"{key_a[2]} / {key_b[2]}"
        out.extend(rows)
    return out


Key = tuple[int, str, str]


def _by_stage(keys_a: list[Key], keys_b: list[Key]) -> list[tuple[Key, Key]]:
    """Stage-by-stage pairs when each run has one (provider, region) per stage."""
    one_a = {key[0]: key for key in keys_a}
    one_b = {key[0]: key for key in keys_b}
    if len(one_a) != len(keys_a) or len(one_b) != len(keys_b):
        return []
    return [(one_a[stage], one_b[stage]) for stage in sorted(set(one_a) & set(one_b))]


def pareto(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Cost per 1M output tokens against p99 TTFT for every row with both; ``pareto`` marks
    the points no other point beats on both (lower or equal on each, lower on one)."""
    points = [
        {
            "provider": r["provider"],
            "stage": r["stage"],
            "region": r["region"],
            "concurrency": r["concurrency"],
            "cost_per_mtok_output": r["cost_per_mtok_output"],
            "ttft_p99_ms": r["ttft_p99_ms"],
            "ttft_p99_low_sample": "ttft_p99_ms" in r.get("low_sample", []),
        }
        for r in rows
        if r.get("cost_per_mtok_output") is not None and r.get("ttft_p99_ms") is not None
    ]
    for point in points:
        cost, p99 = point["cost_per_mtok_output"], point["ttft_p99_ms"]
        point["pareto"] = not any(
            o["cost_per_mtok_output"] <= cost
            and o["ttft_p99_ms"] <= p99
            and (o["cost_per_mtok_output"] < cost or o["ttft_p99_ms"] < p99)
            for o in points
        )
    return sorted(points, key=lambda p: (p["cost_per_mtok_output"], p["ttft_p99_ms"]))
