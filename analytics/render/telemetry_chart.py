"""The HTML report's server-telemetry chart: queue depth and KV use against TTFT over time.

Top panel: requests running (solid) and waiting (dashed) on the server, per provider ×
region, with the KV cache's share in use (dotted) on the right axis. Bottom panel: the
median TTFT of the requests sent in the same time bucket. Both share the x axis
(seconds since the run's first send, the errors chart's clock) and its stage bands, so
a queue building up and TTFT climbing line up by eye. Data: analytics/telemetry/metrics.py.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from analytics.render.chart_style import (
    COUNT_TICKS,
    MS_TICKS,
    SHARE_TICKS,
    Palette,
    axis,
    base_layout,
)
from analytics.report.build import RunReport

# (metric, panel row, right axis, dash, what it is)
_TRACES = (
    ("running_requests", 1, False, "solid", "running"),
    ("waiting_requests", 1, False, "dash", "waiting"),
    ("kv_cache_usage", 1, True, "dot", "KV cache in use"),
    ("ttft_p50_ms", 2, False, "solid", "TTFT p50"),
)


def _hover(name: str, label: str, metric: str) -> str:
    if metric == "kv_cache_usage":
        value = "%{y:.1%}"
    elif metric == "ttft_p50_ms":
        value = "%{y:,.1f} ms"
    else:
        value = "%{y:,.1f} requests"
    return f"{name} · t≈%{{x:,.1f}} s<br>{label}: {value}<extra></extra>"


def telemetry_figure(report: RunReport, colours: Palette) -> go.Figure | None:
    """The chart, or None when the run scraped no server metrics."""
    data: dict[str, Any] = report.plots.get("server_timeline", {})
    series = data.get("series", [])
    if not series:
        return None
    centres = data["t_s"]
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        row_heights=[0.55, 0.45],
        vertical_spacing=0.08,
        specs=[[{"secondary_y": True}], [{"secondary_y": False}]],
    )
    for entry in series:
        provider, region = str(entry["provider"]), str(entry["region"])
        name = colours.name(provider, region)
        colour = colours.colour(provider, region)
        for metric, row, right, dash, label in _TRACES:
            values = entry["values"].get(metric)
            if values is None:
                continue
            trace = go.Scatter(
                x=centres,
                y=values,
                mode="lines+markers" if row == 2 else "lines",
                connectgaps=False,
                name=f"{name} · {label}",
                line={"color": colour, "dash": dash},
                marker={"symbol": colours.symbol(region), "size": 5, "color": colour},
                hovertemplate=_hover(name, label, metric),
            )
            if row == 1:
                fig.add_trace(trace, row=1, col=1, secondary_y=right)
            else:
                fig.add_trace(trace, row=2, col=1)
    duration = float(data.get("duration_s") or 1.0)
    fig.update_layout(
        base_layout(
            f"Server queue and KV cache vs TTFT · {data['buckets']} buckets of "
            f"{duration / max(int(data['buckets']), 1):,.3g} s",
            620,
            "Top: requests the server reports running (solid) and waiting (dashed), and the "
            "KV cache's share in use (dotted, right axis), scraped from metrics_url. Bottom: "
            "median TTFT of the requests sent in each bucket.",
        ),
        legend={"title": {"text": colours.legend_title()}},
    )
    fig.update_xaxes(axis("", COUNT_TICKS, range=[0, duration]))
    fig.update_xaxes(title_text="seconds since the run's first send", row=2)
    fig.update_yaxes(
        axis("requests on the server", COUNT_TICKS, rangemode="tozero"),
        row=1,
        secondary_y=False,
    )
    fig.update_yaxes(
        axis("KV cache in use", SHARE_TICKS, rangemode="tozero"), row=1, secondary_y=True
    )
    fig.update_yaxes(axis("TTFT p50 (ms)", MS_TICKS, rangemode="tozero"), row=2)
    return fig
