"""Data behind the HTML report's charts, queried from DuckDB (no rendering here).

Latency-vs-throughput, cost-vs-p99 and the region comparison come from the summary rows;
the TTFT and ITL CDFs, the ITL histogram and errors over time need their own queries
(``sql/ttft_cdf.sql``, ``sql/itl_cdf.sql`` etc.). Rendering: analytics/render/charts.py.
"""

from __future__ import annotations

from typing import Any

import duckdb

from analytics.store.db import load_sql

CDF_POINTS = 101
ITL_BINS = 40
TIME_BUCKETS = 30


def _rows(cursor: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
    return cursor.fetchall()


def cdf_fractions() -> list[float]:
    """The probabilities a CDF is sampled at: 0, 0.01, …, 1."""
    return [i / (CDF_POINTS - 1) for i in range(CDF_POINTS)]


def _cdf(con: duckdb.DuckDBPyConnection, run_id: str, metric: str) -> list[dict[str, Any]]:
    fractions = cdf_fractions()
    answer = con.execute(load_sql(f"{metric}_cdf"), {"run_id": run_id, "fractions": fractions})
    return [
        {
            "stage": stage,
            "provider": provider,
            "region": region,
            "n": n,
            "fractions": fractions,
            f"{metric}_ms": list(values),
        }
        for stage, provider, region, n, values in _rows(answer)
    ]


def ttft_cdf(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict[str, Any]]:
    """Per stage × provider × region: TTFT (ms) at fractions 0, 0.01, …, 1."""
    return _cdf(con, run_id, "ttft")


def itl_cdf(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict[str, Any]]:
    """Per stage × provider × region: inter-token gap (ms) at fractions 0, 0.01, …, 1."""
    return _cdf(con, run_id, "itl")


def itl_histogram(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, Any]:
    """Counts of ITL gaps per provider on shared log-spaced bin edges (ms)."""
    answer = _rows(con.execute(load_sql("itl_histogram"), {"run_id": run_id, "bins": ITL_BINS}))
    if not answer:
        return {"edges_ms": [], "counts": {}}
    lo, hi = float(answer[0][3]), float(answer[0][4])
    ratio = (hi / lo) ** (1.0 / ITL_BINS) if hi > lo else 1.0
    edges = [lo * ratio**i for i in range(ITL_BINS + 1)]
    counts: dict[str, list[int]] = {}
    for provider, bucket, n, _, _ in answer:
        counts.setdefault(provider, [0] * ITL_BINS)[int(bucket or 0)] += int(n)
    return {"edges_ms": edges, "counts": counts}


def errors_over_time(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, Any]:
    """Requests per outcome (``ok`` or an error class) in equal time buckets of the run.

    ``counts`` is per outcome over all providers; ``series`` per provider × region the
    requests sent and the failed ones per bucket; ``stages`` each stage's first and last
    send (seconds since the run's first), so a chart can show which load level it was."""
    answer = _rows(
        con.execute(load_sql("errors_over_time"), {"run_id": run_id, "buckets": TIME_BUCKETS})
    )
    duration = float(answer[0][5] or 0.0) if answer else 0.0
    counts: dict[str, list[int]] = {}
    series: dict[tuple[str, str], dict[str, Any]] = {}
    for bucket, provider, region, outcome, n, _ in answer:
        index = int(bucket or 0)
        counts.setdefault(outcome, [0] * TIME_BUCKETS)[index] += int(n)
        mine = series.setdefault(
            (provider, region),
            {
                "provider": provider,
                "region": region,
                "requests": [0] * TIME_BUCKETS,
                "errors": [0] * TIME_BUCKETS,
            },
        )
        mine["requests"][index] += int(n)
        if outcome != "ok":
            mine["errors"][index] += int(n)
    spans = _rows(con.execute(load_sql("stage_spans"), {"run_id": run_id}))
    return {
        "duration_s": duration,
        "buckets": TIME_BUCKETS,
        "counts": counts,
        "series": [series[key] for key in sorted(series)],
        "stages": [
            {"stage": stage, "start_s": float(start), "end_s": float(end), "concurrency": conc}
            for stage, start, end, conc in spans
        ],
    }


def plot_data(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, Any]:
    """Everything the HTML charts need beyond the summary rows."""
    return {
        "ttft_cdf": ttft_cdf(con, run_id),
        "itl_cdf": itl_cdf(con, run_id),
        "itl_histogram": itl_histogram(con, run_id),
        "errors_over_time": errors_over_time(con, run_id),
    }
