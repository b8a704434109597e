"""The report of a large run from the shards' stored pre-aggregates (analytics/store/summaries.py).

A run small enough (``ExactLimits``) is reported from its raw records: exact percentiles,
as tests compare them with numpy. Above that, reading 10M requests and 80M ITL gaps per
report cannot fit a 2 s budget on two cores, so the report reads the stored per-shard
sums (``stored_summary.sql``) and histograms (``stored_histograms.sql``): counts, rates,
goodput and cost are the same arithmetic on stored sums; the most frequent error messages
come from each shard's stored list (analytics/report/top_errors.py); percentiles, their bootstrap
intervals, the means and standard deviations and the TTFT and ITL CDFs come from the
log-bucketed histograms, within a relative error of ``RELATIVE_ERROR`` (analytics/stats/sketch.py;
the deviation relative to the root mean square), and the report says so.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np

from analytics.report.plots import ITL_BINS, cdf_fractions
from analytics.sql.files import load_sql
from analytics.sql.results import first_row
from analytics.stats.percentiles import QUANTILES
from analytics.stats.sketch import RELATIVE_ERROR, Histogram
from analytics.store.summaries import summaries_complete

GroupKey = tuple[int, str, str]  # stage, provider, region
# Percentile metrics of the summary rows; each is also a stored histogram's name.
HISTOGRAM_METRICS = ("ttft", "itl", "tpot", "e2e", "ttft_intent", "e2e_intent")
EXACT: dict[str, Any] = {"method": "exact"}
HISTOGRAM: dict[str, Any] = {
    "method": "log_histogram",
    "relative_error": RELATIVE_ERROR,
    "note": f"percentiles, intervals, means and CDF within {RELATIVE_ERROR:.2%} of the exact "
    f"value, standard deviations within {RELATIVE_ERROR:.2%} of the root mean square "
    "(log-bucketed histograms stored per shard)",
}


@dataclass(frozen=True, slots=True)
class ExactLimits:
    """Largest run reported with exact percentiles from its raw records."""

    ok_requests: int = 200_000
    itl_gaps: int = 2_000_000


def use_histograms(con: duckdb.DuckDBPyConnection, run_id: str, limits: ExactLimits) -> bool:
    """Whether the run is above ``limits`` and every counted shard has its aggregates."""
    row = first_row(
        con.execute(
            """
        SELECT coalesce(sum(m.ok), 0),
               coalesce(sum((SELECT sum(h.n) FROM shard_histograms AS h
                             WHERE h.run_id = m.run_id AND h.shard_id = m.shard_id
                               AND h.metric = 'itl')), 0)
        FROM shard_summaries AS m
        JOIN shards AS s
          ON s.run_id = m.run_id AND s.shard_id = m.shard_id AND s.accepted_attempt = m.attempt
        WHERE m.run_id = ?
        """,
            [run_id],
        )
    )
    ok, gaps = (int(row[0]), int(row[1])) if row else (0, 0)
    if ok <= limits.ok_requests and gaps <= limits.itl_gaps:
        return False
    return summaries_complete(con, run_id)


def group_histograms(
    con: duckdb.DuckDBPyConnection, run_id: str
) -> dict[GroupKey, dict[str, Histogram]]:
    """Each group's merged histogram per metric."""
    columns = con.execute(load_sql("stored_histograms"), {"run_id": run_id}).fetchnumpy()
    out: dict[GroupKey, dict[str, Histogram]] = defaultdict(dict)
    if len(columns["n"]) == 0:
        return out
    names = ("stage", "provider", "region", "metric")
    keys = list(zip(*(columns[name] for name in names), strict=True))
    # Rows arrive sorted by group, metric, bucket: cut at every change of key.
    starts = [0] + [i for i in range(1, len(keys)) if keys[i] != keys[i - 1]] + [len(keys)]
    for a, b in itertools.pairwise(starts):
        stage, provider, region, metric = keys[a]
        out[(int(stage), str(provider), str(region))][str(metric)] = Histogram(
            columns["bucket"][a:b].astype(np.int64), columns["n"][a:b].astype(np.int64)
        )
    return out


def stored_summary_rows(
    con: duckdb.DuckDBPyConnection, run_id: str, histograms: dict[GroupKey, dict[str, Histogram]]
) -> list[dict[str, Any]]:
    """``stage_summary``-shaped rows (same columns, same order) from stored aggregates."""
    view_columns = [
        str(d[0]) for d in con.execute("DESCRIBE SELECT * FROM stage_summary").fetchall()
    ]
    cursor = con.execute(load_sql("stored_summary"), {"run_id": run_id})
    names = [d[0] for d in cursor.description or []]
    rows = []
    for values in cursor.fetchall():
        stored = dict(zip(names, values, strict=True))
        hists = histograms.get((stored["stage"], stored["provider"], stored["region"]), {})
        for metric in HISTOGRAM_METRICS:
            hist = hists.get(metric)
            if metric == "itl":
                stored["itl_n"] = hist.n if hist else 0
            points: list[float | None] = [None] * len(QUANTILES)
            if hist and hist.n:
                points = list(hist.quantiles([q for _, q in QUANTILES]))
            for (label, _), value in zip(QUANTILES, points, strict=True):
                stored[f"{metric}_{label}_ms"] = value
            mean, std = hist.mean_std() if hist and hist.n else (None, None)
            stored[f"{metric}_mean_ms"], stored[f"{metric}_std_ms"] = mean, std
        decode = hists.get("decode_tok_s")
        stored["decode_tok_s_p50"] = decode.quantiles([0.5])[0] if decode and decode.n else None
        rows.append({column: stored.get(column) for column in view_columns})
    return rows


def _histogram_cdf(
    histograms: dict[GroupKey, dict[str, Histogram]], metric: str
) -> list[dict[str, Any]]:
    fractions = cdf_fractions()
    return [
        {
            "stage": stage,
            "provider": provider,
            "region": region,
            "n": hists[metric].n,
            "fractions": fractions,
            f"{metric}_ms": hists[metric].quantiles(fractions),
        }
        for (stage, provider, region), hists in sorted(histograms.items())
        if metric in hists and hists[metric].n
    ]


def histogram_plots(histograms: dict[GroupKey, dict[str, Histogram]]) -> dict[str, Any]:
    """The TTFT and ITL CDFs and the ITL histogram of the charts, from the stored histograms."""
    cdf = _histogram_cdf(histograms, "ttft")
    itl_cdf = _histogram_cdf(histograms, "itl")
    per_provider: dict[str, list[Histogram]] = defaultdict(list)
    for (_, provider, _), hists in histograms.items():
        if "itl" in hists:
            per_provider[provider].append(hists["itl"])
    reps = {
        provider: [(h.representatives(), h.counts) for h in hs]
        for provider, hs in per_provider.items()
    }
    positive = [r[r > 0] for parts in reps.values() for r, _ in parts if (r > 0).any()]
    if not positive:
        empty: dict[str, Any] = {"edges_ms": [], "counts": {}}
        return {"ttft_cdf": cdf, "itl_cdf": itl_cdf, "itl_histogram": empty}
    lo = float(min(p.min() for p in positive))
    hi = float(max(p.max() for p in positive))
    ratio = (hi / lo) ** (1.0 / ITL_BINS) if hi > lo else 1.0
    edges = [lo * ratio**i for i in range(ITL_BINS + 1)]
    counts: dict[str, list[int]] = {}
    for provider in sorted(reps):
        total = np.zeros(ITL_BINS, dtype=np.int64)
        for r, n in reps[provider]:
            keep = r > 0
            if hi > lo:
                index = np.floor(np.log(r[keep] / lo) / np.log(hi / lo) * ITL_BINS)
            else:
                index = np.zeros(int(keep.sum()))
            np.add.at(total, np.clip(index, 0, ITL_BINS - 1).astype(np.int64), n[keep])
        counts[provider] = [int(c) for c in total]
    return {
        "ttft_cdf": cdf,
        "itl_cdf": itl_cdf,
        "itl_histogram": {"edges_ms": edges, "counts": counts},
    }
