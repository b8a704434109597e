"""The trend report as one self-contained HTML page: a chart of each figure over time.

One panel per figure (TTFT p50, p99, output tok/s, error rate, $/1M output), one line per
provider · region (· stage when the runs have several), each run a point at its creation
time with its 95 % interval as an error bar when the run has one; the latest value of a
series flagged as a regression is ringed in red. Plotly's JavaScript is inlined (no
CDN), as in the run report (analytics/render/html_report.py); text others wrote is escaped.
"""

from __future__ import annotations

from html import escape
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from analytics.render.chart_style import Palette, base_layout
from analytics.render.charts import figure_div, plotly_js
from analytics.trends.build import METRICS, TrendReport
from analytics.trends.text import JUDGEMENT_HEADER, judgement_cells, span_note

_STYLE = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
th,td{border:1px solid #ddd;padding:2px 6px;text-align:left}th{background:#f4f4f4}
.note{color:#666;font-size:12px}.bad{color:#b00020;font-weight:600}
"""
_TICKS = {
    "ttft_p50_ms": ",~r",
    "ttft_p99_ms": ",~r",
    "output_tok_s": ",~r",
    "error_rate": ".3~%",
    "cost_per_mtok_output": "$,.3~r",
}


def _series(report: TrendReport) -> list[tuple[str, str, int]]:
    return sorted({(p["provider"], p["region"], p["stage"]) for p in report.points})


def _error_bars(points: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Each point's 95 % interval as an asymmetric error bar (None: no point has one)."""
    if all(p["ci_low"] is None for p in points):
        return None

    def above(p: dict[str, Any]) -> float | None:
        return None if p["ci_high"] is None or p["value"] is None else p["ci_high"] - p["value"]

    def below(p: dict[str, Any]) -> float | None:
        return None if p["ci_low"] is None or p["value"] is None else p["value"] - p["ci_low"]

    return {
        "type": "data",
        "symmetric": False,
        "array": [above(p) for p in points],
        "arrayminus": [below(p) for p in points],
        "thickness": 1,
    }


_RING = {"size": 16, "color": "rgba(0,0,0,0)", "line": {"color": "#d62728", "width": 3}}


def figure(report: TrendReport) -> go.Figure:
    """The figures over time, one panel each."""
    series = _series(report)
    palette = Palette.of((provider, region) for provider, region, _ in series)
    stages = len({stage for _, _, stage in series}) > 1
    fig = make_subplots(
        rows=len(METRICS),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.04,
        subplot_titles=[f"{m.title}{f' ({m.unit})' if m.unit else ''}" for m in METRICS],
    )
    flagged = {
        (r["provider"], r["region"], r["stage"], r["metric"], r["latest_run_id"])
        for r in report.regressions
    }
    for index, metric in enumerate(METRICS, start=1):
        for provider, region, stage in series:
            points = [
                p
                for p in report.points
                if (p["provider"], p["region"], p["stage"], p["metric"])
                == (provider, region, stage, metric.key)
            ]
            name = palette.name(provider, region) + (f" · stage {stage}" if stages else "")
            fig.add_trace(
                go.Scatter(
                    x=[p["created_at"] for p in points],
                    y=[p["value"] for p in points],
                    mode="lines+markers",
                    name=name,
                    legendgroup=name,
                    showlegend=index == 1,
                    line={"color": palette.colour(provider, region)},
                    marker={"symbol": palette.symbol(region), "size": 7},
                    error_y=_error_bars(points),
                    customdata=[[p["run_id"], "*" if p["low_sample"] else ""] for p in points],
                    hovertemplate="run %{customdata[0]}<br>%{y}%{customdata[1]}<extra>"
                    + escape(name)
                    + "</extra>",
                ),
                row=index,
                col=1,
            )
            bad = [
                p for p in points if (provider, region, stage, metric.key, p["run_id"]) in flagged
            ]
            if bad:
                fig.add_trace(
                    go.Scatter(
                        x=[p["created_at"] for p in bad],
                        y=[p["value"] for p in bad],
                        mode="markers",
                        name="regression",
                        legendgroup="regression",
                        showlegend=False,
                        marker={
                            "size": 16,
                            "color": "rgba(0,0,0,0)",
                            "line": {"color": "#d62728", "width": 3},
                        },
                        hoverinfo="skip",
                    ),
                    row=index,
                    col=1,
                )
        fig.update_yaxes(
            tickformat=_TICKS[metric.key],
            gridcolor="#e6e6e6",
            rangemode="nonnegative",
            row=index,
            col=1,
        )
    fig.update_xaxes(gridcolor="#e6e6e6", showline=True, linecolor="#999")
    fig.update_layout(
        **base_layout(
            report.title,
            260 * len(METRICS),
            "each point a run (95 % interval where the run has one); red ring: regression",
        )
    )
    return fig


def render_html(report: TrendReport) -> str:
    """The whole trend report as one HTML document."""
    regressions = "".join(
        f'<li class="bad">{escape(str(r["provider"]))} · {escape(str(r["region"]))} · stage '
        f"{r['stage']}: {escape(str(r['verdict']))}</li>"
        for r in report.regressions
    )
    rows = "".join(
        "<tr>"
        + "".join(f"<td>{escape(cell)}</td>" for cell in judgement_cells(report, r))
        + "</tr>"
        for r in report.rows
    )
    head = "".join(f"<th>{escape(h)}</th>" for h in JUDGEMENT_HEADER)
    chart = figure_div(figure(report), "trend") if report.points else ""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(report.title)}</title><style>{_STYLE}</style>"
        f'<script type="text/javascript">{plotly_js()}</script></head><body>'
        f'<h1>{escape(report.title)}</h1><p class="note">{escape(span_note(report))}</p>'
        f"<h2>Regressions</h2><ul>{regressions or '<li>none in the latest run</li>'}</ul>"
        f"<h2>Latest run against the trailing window</h2>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
        f"<h2>Over time</h2>{chart}</body></html>\n"
    )
