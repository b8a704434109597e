"""Server telemetry in the report (providers[].metrics_url, docs/telemetry.md).

``server_metrics`` is the report's section: per provider × region × stage the mean and
max of each canonical figure over the stage's span (``sql/telemetry_summary.sql``), how
the scrapes went (``sql/telemetry_scrapes.sql``), and the figures the server's own
counters give (``sql/telemetry_stage_figures.sql``: prefix-cache hit rate, speculative
decoding's acceptance, joules per output token); all empty for a run that scraped
nothing. ``telemetry_timeline`` is the data of the HTML chart of queue depth and KV use
against TTFT over time (``sql/telemetry_timeline.sql``).
"""

from __future__ import annotations

from typing import Any

import duckdb

from analytics.sql.files import load_sql
from analytics.sql.results import first_row

# Time buckets of the chart: at most this many, and no more than a series has scrapes
# (a bucket without a scrape would be a gap, not a finer view).
MAX_TIMELINE_BUCKETS = 300


def _rows(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    columns = [d[0] for d in cursor.description or []]
    return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def has_scrapes(con: duckdb.DuckDBPyConnection, run_id: str) -> bool:
    """Whether any shard of the run scraped a metrics endpoint."""
    row = first_row(
        con.execute("SELECT count(*) FROM server_metric_scrapes WHERE run_id = ?", [run_id])
    )
    return bool(row and row[0])


def server_metrics(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, Any]:
    """The report's ``server_metrics`` section: ``summary`` rows (provider, region,
    stage, metric, samples, mean, max), ``scrapes`` rows (provider, region, stage,
    scrapes, errors, top_error, mean_scrape_ms, series_dropped) and ``stages`` rows
    (provider, region, stage and the columns of :data:`STAGE_FIGURES`)."""
    if not has_scrapes(con, run_id):
        return {"summary": [], "scrapes": [], "stages": []}
    params = {"run_id": run_id}
    return {
        "summary": _rows(con.execute(load_sql("telemetry_summary"), params)),
        "scrapes": _rows(con.execute(load_sql("telemetry_scrapes"), params)),
        "stages": _rows(con.execute(load_sql("telemetry_stage_figures"), params)),
    }


# The columns of a ``stages`` row after provider, region and stage (docs/metrics.md).
STAGE_FIGURES = (
    "prefix_cache_queried_tokens",
    "prefix_cache_hit_tokens",
    "server_prefix_cache_hit_rate",
    "spec_drafts",
    "spec_draft_tokens",
    "spec_accepted_tokens",
    "spec_acceptance_rate",
    "spec_mean_accepted_length",
    "energy_source",
    "energy_window_s",
    "gpu_energy_j",
    "mean_gpu_power_w",
    "output_tokens_in_window",
    "joules_per_output_token",
)


def timeline_buckets(con: duckdb.DuckDBPyConnection, run_id: str) -> int:
    """Buckets of the chart: the most scrapes one shard attempt took, capped."""
    row = first_row(
        con.execute(
            "SELECT max(n) FROM (SELECT count(*) AS n FROM server_metric_scrapes "
            "WHERE run_id = ? GROUP BY shard_id, attempt)",
            [run_id],
        )
    )
    return max(1, min(MAX_TIMELINE_BUCKETS, int(row[0] or 1) if row else 1))


def telemetry_timeline(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, Any]:
    """Per provider × region, the bucket centres (s since the run's first send) and the
    values of running_requests, waiting_requests, kv_cache_usage and ttft_p50_ms in each
    (None where the bucket has none); empty ``series`` when nothing was scraped."""
    if not has_scrapes(con, run_id):
        return {"duration_s": 0.0, "buckets": 0, "series": []}
    buckets = timeline_buckets(con, run_id)
    answer = con.execute(load_sql("telemetry_timeline"), {"run_id": run_id, "buckets": buckets})
    series: dict[tuple[str, str], dict[str, Any]] = {}
    duration = 0.0
    width = 0.0
    for provider, region, metric, bucket, value, duration_s in answer.fetchall():
        duration = float(duration_s)
        width = duration / buckets
        entry = series.setdefault(
            (provider, region), {"provider": provider, "region": region, "values": {}}
        )
        entry["values"].setdefault(metric, [None] * buckets)[int(bucket)] = float(value)
    return {
        "duration_s": duration,
        "buckets": buckets,
        "t_s": [(i + 0.5) * width for i in range(buckets)],
        "series": [series[key] for key in sorted(series)],
    }


TELEMETRY_TITLE = "Server telemetry (scraped from metrics_url)"
TELEMETRY_NOTE = (
    "Mean / max over the scrapes taken while each stage's requests were in flight; "
    "counters as rates between scrapes; – where the server exposes no such figure "
    "(docs/telemetry.md)."
)
# (header, metric, statistic, format)
_COLUMNS = (
    ("running mean", "running_requests", "mean", "{:,.1f}"),
    ("running max", "running_requests", "max", "{:,.0f}"),
    ("waiting mean", "waiting_requests", "mean", "{:,.1f}"),
    ("waiting max", "waiting_requests", "max", "{:,.0f}"),
    ("KV mean", "kv_cache_usage", "mean", "{:.1%}"),
    ("KV max", "kv_cache_usage", "max", "{:.1%}"),
    ("prompt tok/s", "prompt_tokens_per_s", "mean", "{:,.0f}"),
    ("output tok/s", "generation_tokens_per_s", "mean", "{:,.0f}"),
    ("GPU util", "gpu_utilization", "mean", "{:.0%}"),
    ("GPU mem max (GiB)", "gpu_memory_used_bytes", "max", "{:,.1f}"),
)
TELEMETRY_HEADER = ["provider", "region", "stage", *(c[0] for c in _COLUMNS), "scrapes", "failed"]
TELEMETRY_NUMERIC = [False, False, True] + [True] * (len(_COLUMNS) + 2)


def _cell(value: float | None, fmt: str, metric: str) -> str:
    if value is None:
        return "–"
    if metric == "gpu_memory_used_bytes":
        value = value / 1024**3
    return fmt.format(value)


def telemetry_rows(section: dict[str, Any]) -> list[list[str]]:
    """The text cells of the telemetry table (one row per provider × region × stage that
    was scraped), for the HTML and markdown reports."""
    figures: dict[tuple[str, str, int], dict[tuple[str, str], float]] = {}
    for row in section.get("summary", []):
        key = (row["provider"], row["region"], int(row["stage"]))
        cells = figures.setdefault(key, {})
        cells[(row["metric"], "mean")] = row["mean"]
        cells[(row["metric"], "max")] = row["max"]
    out = []
    for scrape in section.get("scrapes", []):
        key = (scrape["provider"], scrape["region"], int(scrape["stage"]))
        cells = figures.get(key, {})
        shown = [_cell(cells.get((metric, stat)), fmt, metric) for _, metric, stat, fmt in _COLUMNS]
        failed = f"{scrape['errors']:,}"
        if scrape["errors"]:
            failed += f" ({scrape['top_error']})"
        out.append([key[0], key[1], str(key[2]), *shown, f"{scrape['scrapes']:,}", failed])
    return out
