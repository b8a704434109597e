"""Bootstrap confidence intervals and low-sample flags for the report's percentile rows.

The SQL summary gives point estimates; this module fetches the sorted values around each
p50/p99 (one pass, ``bootstrap_windows.sql``), draws the seeded bootstrap replicates
(``analytics.stats.percentiles``), and annotates each row with ``*_ci_low``/``*_ci_high``
and the list of percentile columns its sample cannot support.

ITL percentiles get no interval: gaps of one request are correlated (one slow batch step
delays them together), so an iid bootstrap over gaps would be falsely narrow; they are
flagged by the same low-sample rule, counted in gaps.
"""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa

from analytics.sql.files import load_sql
from analytics.stats.percentiles import (
    CI_QUANTILES,
    QUANTILES,
    SortedWindow,
    bootstrap_quantile,
    percentile_interval,
    stable_seed,
    supported,
    window_from_split,
    window_half_width,
)
from analytics.stats.sketch import Histogram

# Per-request metrics of the summary rows, by column prefix.
PERCENTILE_METRICS = ("ttft", "itl", "tpot", "e2e", "ttft_intent", "e2e_intent")
CI_METRICS = ("ttft", "tpot", "e2e", "ttft_intent", "e2e_intent")

GroupKey = tuple[int, str, str]  # stage, provider, region
ReplicateKey = tuple[int, str, str, str, str]  # stage, provider, region, metric, p50|p99


def flag_low_samples(row: dict[str, Any]) -> list[str]:
    """Names of the percentile columns of ``row`` that its sample size cannot support."""
    flagged = []
    for metric in PERCENTILE_METRICS:
        n = row.get(f"{metric}_n") or 0
        for label, q in QUANTILES:
            column = f"{metric}_{label}_ms"
            if row.get(column) is not None and not supported(n, q):
                flagged.append(column)
    return flagged


def _wanted(row: dict[str, Any]) -> list[tuple[str, str, float]]:
    """(metric, label, q) of ``row`` that get an interval: supported and present."""
    return [
        (metric, label, q)
        for metric in CI_METRICS
        for label, q in CI_QUANTILES
        if row.get(f"{metric}_{label}_ms") is not None and supported(row[f"{metric}_n"], q)
    ]


def _sql_windows(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    rows: list[dict[str, Any]],
    wanted: dict[GroupKey, list[tuple[str, str, float]]],
) -> dict[tuple[GroupKey, str, str], SortedWindow]:
    """Sorted raw values around each wanted percentile, in one SQL pass."""
    width = {"p50": 1, "p99": 1}
    for row in rows:
        for metric, label, q in wanted[(row["stage"], row["provider"], row["region"])]:
            width[label] = max(width[label], window_half_width(row[f"{metric}_n"], q))
    pivots = pa.table(
        {
            "stage": pa.array([r["stage"] for r in rows], pa.int32()),
            "provider": [r["provider"] for r in rows],
            "region": [r["region"] for r in rows],
            **{
                f"{m}_{label}": pa.array([r[f"{m}_{label}_ms"] for r in rows], pa.float64())
                for m in CI_METRICS
                for label, _ in CI_QUANTILES
            },
        }
    )
    con.register("boot_pivots", pivots)
    try:
        answer = con.execute(
            load_sql("bootstrap_windows"),
            {"run_id": run_id, "w50": width["p50"], "w99": width["p99"]},
        )
        columns = [d[0] for d in answer.description or []]
        fetched = {
            (w[0], w[1], w[2]): dict(zip(columns, w, strict=True)) for w in answer.fetchall()
        }
    finally:
        con.unregister("boot_pivots")
    windows: dict[tuple[GroupKey, str, str], SortedWindow] = {}
    for row in rows:
        key: GroupKey = (row["stage"], row["provider"], row["region"])
        split = fetched.get(key)
        if split is None:
            continue
        for metric, label, _ in wanted[key]:
            prefix = f"{metric}_{label}"
            windows[(key, metric, label)] = window_from_split(
                row[f"{metric}_n"],
                split[f"{prefix}_below"],
                split[f"{prefix}_lower"] or [],
                split[f"{prefix}_upper"] or [],
            )
    return windows


def bootstrap_rows(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    rows: list[dict[str, Any]],
    histograms: dict[GroupKey, dict[str, Histogram]] | None = None,
) -> dict[ReplicateKey, list[float]]:
    """Replicates of every supported p50/p99 of ``rows``; adds ``*_ci_low/high`` to rows.

    The sorted values near each percentile come from the raw records, or, for a run
    reported from stored histograms, from those (within their relative error)."""
    wanted = {(r["stage"], r["provider"], r["region"]): _wanted(r) for r in rows}
    if not any(wanted.values()):
        return {}
    if histograms is None:
        windows = _sql_windows(con, run_id, rows, wanted)
    else:
        windows = {}
        for group, items in wanted.items():
            for metric, label, q in items:
                hist = histograms.get(group, {}).get(metric)
                if hist is not None and hist.n:
                    windows[(group, metric, label)] = hist.window(q, window_half_width(hist.n, q))
    replicates: dict[ReplicateKey, list[float]] = {}
    for row in rows:
        key: GroupKey = (row["stage"], row["provider"], row["region"])
        for metric, label, q in wanted[key]:
            window = windows.get((key, metric, label))
            if window is None:
                continue
            prefix = f"{metric}_{label}"
            seed = stable_seed(run_id, *key, metric, label)
            draws = bootstrap_quantile(window, q, seed)
            replicates[(*key, metric, label)] = draws
            low, high = percentile_interval(draws)
            row[f"{prefix}_ci_low_ms"] = low
            row[f"{prefix}_ci_high_ms"] = high
    return replicates
