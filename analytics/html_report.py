"""The report as one self-contained HTML file: tables, verdicts and inline SVG charts.

No script, stylesheet, font or image is fetched: the file opens offline and can be
attached to a ticket as is. Charts: TTFT CDF per provider (one panel per stage), ITL
histogram, latency vs throughput across stages (where the knee shows), cost vs p99 TTFT
(Pareto points ringed) and request outcomes over time.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from analytics.columns import columns
from analytics.formatting import (
    CAPTION,
    LOW_SAMPLE_NOTE,
    PERCENTILE_HEADER,
    method_note,
    money,
    number,
    percentile_rows,
)
from analytics.report import RunReport
from analytics.svg import Chart, color

# Errors in warm colours, none of them green: "ok" is the light green base of each bar.
_ERROR_COLOURS = ("#d62728", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf")

_STYLE = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
th,td{border:1px solid #ddd;padding:3px 6px;white-space:nowrap}
th{background:#f4f4f4}td.n{text-align:right;font-variant-numeric:tabular-nums}
.wide{overflow-x:auto}.charts{display:flex;flex-wrap:wrap;gap:12px}.note{color:#666;font-size:12px}
"""


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="n">{escape(c)}</td>' if n else f"<td>{escape(c)}</td>"
            for c, n in zip(row, numeric, strict=True)
        )
        + "</tr>"
        for row in rows
    )
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    return f'<div class="wide">{table}</div>'


def _series_name(row: dict[str, Any], regions: set[str]) -> str:
    return str(row["provider"]) + (f"@{row['region']}" if len(regions) > 1 else "")


def ttft_cdf_charts(report: RunReport) -> list[str]:
    """One CDF panel per stage, a line per provider (and region when there are several)."""
    cdfs = report.plots.get("ttft_cdf", [])
    regions = {c["region"] for c in cdfs}
    providers = sorted({c["provider"] for c in cdfs})
    charts = []
    for stage in sorted({c["stage"] for c in cdfs}):
        chart = Chart(f"TTFT CDF · stage {stage}", "TTFT (ms, log)", "fraction ≤", x_log=True)
        for cdf in (c for c in cdfs if c["stage"] == stage):
            chart.line(
                f"{_series_name(cdf, regions)} (n={cdf['n']})",
                cdf["ttft_ms"],
                cdf["fractions"],
                color(providers.index(cdf["provider"])),
            )
        charts.append(chart.render())
    return charts


def itl_histogram_chart(report: RunReport) -> str | None:
    """ITL gaps per provider on log-spaced bins (outlined bars overlap)."""
    hist = report.plots.get("itl_histogram", {})
    edges = hist.get("edges_ms", [])
    if not edges:
        return None
    chart = Chart("ITL histogram (all stages)", "inter-token gap (ms, log)", "gaps", x_log=True)
    for i, (provider, counts) in enumerate(sorted(hist["counts"].items())):
        chart.rects(provider, edges[:-1], edges[1:], [0.0] * len(counts), counts, color(i))
    return chart.render()


def knee_chart(report: RunReport) -> str | None:
    """p50 and p99 TTFT against aggregate output tok/s across stages, per provider."""
    rows = [r for r in report.stages if r["output_tok_s"] and r["ttft_p50_ms"] is not None]
    if not rows:
        return None
    chart = Chart(
        "Latency vs throughput across stages", "aggregate output tok/s", "TTFT (ms)", y_log=True
    )
    regions = {r["region"] for r in rows}
    names = sorted({_series_name(r, regions) for r in rows})
    for i, name in enumerate(names):
        mine = sorted(
            (r for r in rows if _series_name(r, regions) == name), key=lambda r: r["stage"]
        )
        xs = [r["output_tok_s"] for r in mine]
        chart.line(f"{name} p50", xs, [r["ttft_p50_ms"] for r in mine], color(i))
        p99 = [(r["output_tok_s"], r["ttft_p99_ms"]) for r in mine if r["ttft_p99_ms"]]
        chart.points(
            f"{name} p99", [x for x, _ in p99], [y for _, y in p99], color(i),
            labels=[f"c={r['concurrency']}" for r in mine],
        )  # fmt: skip
    return chart.render()


def cost_chart(report: RunReport) -> str | None:
    """Cost per 1M output tokens against p99 TTFT; Pareto-optimal points ringed."""
    if not report.pareto:
        return None
    chart = Chart("Cost vs p99 TTFT", "USD per 1M output tokens", "TTFT p99 (ms)")
    providers = sorted({p["provider"] for p in report.pareto})
    for i, provider in enumerate(providers):
        mine = [p for p in report.pareto if p["provider"] == provider]
        chart.points(
            provider,
            [p["cost_per_mtok_output"] for p in mine],
            [p["ttft_p99_ms"] for p in mine],
            color(i),
            labels=[f"s{p['stage']}" + ("*" if p["ttft_p99_low_sample"] else "") for p in mine],
            emphasis=[p["pareto"] for p in mine],
        )
    return chart.render()


def outcomes_chart(report: RunReport) -> str | None:
    """Requests per outcome class over the run, stacked per time bucket."""
    data = report.plots.get("errors_over_time", {})
    counts: dict[str, list[int]] = data.get("counts", {})
    if not counts:
        return None
    buckets, duration = data["buckets"], data["duration_s"] or 1.0
    width = duration / buckets
    chart = Chart("Request outcomes over time", "seconds since the first send", "requests")
    base = [0.0] * buckets
    order = sorted(counts, key=lambda k: (k != "ok", k))
    for i, outcome in enumerate(order):
        tops = [b + c for b, c in zip(base, counts[outcome], strict=True)]
        colour = "#9ccc9c" if outcome == "ok" else _ERROR_COLOURS[i % len(_ERROR_COLOURS)]
        chart.rects(
            outcome,
            [j * width for j in range(buckets)],
            [(j + 1) * width for j in range(buckets)],
            base,
            tops,
            colour,
        )
        base = tops
    return chart.render()


def _comparison(report: RunReport) -> str:
    comparison = report.comparison
    if not comparison:
        return ""
    rows = [
        [
            str(r["stage"]), r["region"], r["metric"], number(r["a_ms"]), number(r["b_ms"]),
            f"{r['ratio']:.2f}×",
            "–" if r["ci_low"] is None else f"{r['ci_low']:.2f}–{r['ci_high']:.2f}",
            r["verdict"],
        ]
        for r in comparison["rows"]
    ]  # fmt: skip
    return (
        f"<h2>Comparison: {escape(str(comparison['b']))} vs {escape(str(comparison['a']))}</h2>"
        + _table(
            ["stage", "region", "metric", "A (ms)", "B (ms)", "B/A", "95% CI", "verdict"],
            rows,
            [True, False, False, True, True, True, True, False],
        )
    )


def render_html(report: RunReport) -> str:
    """The whole report as one HTML document."""
    title = f"tokenbench run {report.run_id} · {report.name} · {report.state}"
    shown = columns("summary")
    summary = _table(
        [c.header for c in shown],
        [[c.text(row) for c in shown] for row in report.stages],
        [c.numeric for c in shown],
    )
    percentiles = _table(
        PERCENTILE_HEADER, percentile_rows(report.stages), [False] * 4 + [True] * 8
    )
    pareto = _table(
        ["provider", "stage", "region", "$/1M out", "TTFT p99 (ms)", "Pareto-optimal"],
        [
            [
                p["provider"], str(p["stage"]), p["region"], money(p["cost_per_mtok_output"]),
                number(p["ttft_p99_ms"]) + ("*" if p["ttft_p99_low_sample"] else ""),
                "yes" if p["pareto"] else "",
            ]
            for p in report.pareto
        ],
        [False, True, False, True, True, False],
    )  # fmt: skip
    charts = [
        *ttft_cdf_charts(report),
        itl_histogram_chart(report),
        knee_chart(report),
        cost_chart(report),
        outcomes_chart(report),
    ]
    slo = ", ".join(f"{k} ≤ {v:g}" for k, v in report.slo.items() if v is not None) or "none"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{escape(title)}</h1>"
        f'<p class="note">SLO: {escape(slo)}. {escape(CAPTION)}.</p>'
        f"<h2>Summary</h2>{summary}"
        f'<p class="note">{escape(LOW_SAMPLE_NOTE)} {escape(method_note(report.percentiles))}</p>'
        f"{_comparison(report)}"
        f'<h2>Charts</h2><div class="charts">{"".join(c for c in charts if c)}</div>'
        f"<h2>Latency percentiles (ms)</h2>{percentiles}"
        + (f"<h2>Cost vs p99 TTFT</h2>{pareto}" if report.pareto else "")
        + "</body></html>\n"
    )
