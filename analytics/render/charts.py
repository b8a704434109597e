"""The HTML report's charts, drawn with Plotly: one function per chart, each a figure.

Every function takes the ``RunReport`` (its summary rows and ``plots`` data, see
analytics/report/plots.py) and returns a Plotly figure, or None when the run has nothing to
show in it. Styling (one hue per provider, a shade and marker per region, p50 solid and
p99 dashed, tick formats) comes from analytics/render/chart_style.py. Values the report marks
as low-sample keep their mark in hover text; nothing is annotated point by point, so
labels cannot collide. ``figure_div`` turns a figure into a ``<div>`` for a page that
carries Plotly's JavaScript once (``plotly_js``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from analytics.render.chart_style import (
    COUNT_TICKS,
    MS_TICKS,
    OK_COLOUR,
    P50_DASH,
    P99_DASH,
    SHARE_TICKS,
    USD_TICKS,
    Palette,
    axis,
    base_layout,
    error_colour,
    log_ticks,
)
from analytics.render.telemetry_chart import telemetry_figure
from analytics.report.build import RunReport
from analytics.report.server_timings import PARTS, any_joined
from scenarios.stages import stage_label

# Markers on a CDF only where a reader looks: the median and the tail.
_CDF_MARKED = {0.5: 9, 0.9: 7, 0.99: 9}
_CDF_TICKS = [0.0, 0.25, 0.5, 0.75, 0.9, 0.99]
_FACETS_PER_ROW = 3
_CONFIG: dict[str, Any] = {
    "displaylogo": False,
    "responsive": True,
    "modeBarButtonsToRemove": ["select2d", "lasso2d", "autoScale2d"],
    "toImageButtonOptions": {"format": "png", "scale": 2},
}


def palette(report: RunReport) -> Palette:
    """The report's palette: every provider and region of its summary rows."""
    return Palette.of((str(r["provider"]), str(r["region"])) for r in report.stages)


def stage_title(report: RunReport, stage: int) -> str:
    """``stage 2 · c=32`` (closed loop), or ``stage 2`` when the level has no concurrency."""
    levels = {int(r["concurrency"] or 0) for r in report.stages if r["stage"] == stage}
    return stage_label(max(levels, default=0), index=stage, compact=True)


def _low(row: dict[str, Any], column: str) -> str:
    return "* (too few samples: indicative)" if column in row.get("low_sample", ()) else ""


def _cdf_figure(
    report: RunReport,
    cdfs: list[dict[str, Any]],
    value_key: str,
    title: str,
    x_title: str,
    note: str,
) -> go.Figure | None:
    """One panel per stage, one line per provider × region, shared legend."""
    if not cdfs:
        return None
    colours = palette(report)
    stages = sorted({int(c["stage"]) for c in cdfs})
    cols = min(len(stages), _FACETS_PER_ROW)
    rows = -(-len(stages) // cols)
    fig = make_subplots(
        rows=rows,
        cols=cols,
        shared_yaxes=True,
        subplot_titles=[stage_title(report, s) for s in stages],
        horizontal_spacing=0.04,
        vertical_spacing=0.16 if rows > 1 else 0.1,
    )
    shown: set[str] = set()
    fig.update_xaxes(axis(x_title, MS_TICKS, log=True))
    for index, stage in enumerate(stages):
        row, col = index // cols + 1, index % cols + 1
        mine = [c for c in cdfs if c["stage"] == stage]
        values = [float(x) for c in mine for x in c[value_key] if x is not None]
        fig.update_xaxes(log_ticks(values, most=7), row=row, col=col)
        for cdf in mine:
            provider, region = str(cdf["provider"]), str(cdf["region"])
            name = colours.name(provider, region)
            # A log axis cannot show 0 ms (tokens that came in one chunk): the line then
            # starts at the share of such gaps.
            points = [
                (x, y)
                for x, y in zip(cdf[value_key], cdf["fractions"], strict=True)
                if x is not None and x > 0
            ]
            fig.add_trace(
                go.Scatter(
                    x=[x for x, _ in points],
                    y=[y for _, y in points],
                    mode="lines+markers",
                    name=name,
                    legendgroup=name,
                    showlegend=name not in shown,
                    line={"color": colours.colour(provider, region), "width": 2},
                    marker={
                        "symbol": colours.symbol(region),
                        "size": [_CDF_MARKED.get(round(y, 4), 0) for _, y in points],
                        "color": colours.colour(provider, region),
                    },
                    hovertemplate=(
                        f"{name} · {stage_title(report, stage)} (n={cdf['n']:,})<br>"
                        "%{y:.0%} of values ≤ %{x:,.2f} ms<extra></extra>"
                    ),
                ),
                row=row,
                col=col,
            )
            shown.add(name)
    fig.update_layout(
        base_layout(title, 300 * rows + 140, note),
        legend_title_text=colours.legend_title(),
    )
    fig.update_yaxes(axis("", SHARE_TICKS, tickvals=_CDF_TICKS, range=[0, 1.02]))
    fig.update_yaxes(title_text="share of values ≤ x", col=1)
    return fig


def ttft_cdf_figure(report: RunReport) -> go.Figure | None:
    """TTFT CDF per stage, a line per provider × region (markers at p50, p90, p99)."""
    return _cdf_figure(
        report,
        report.plots.get("ttft_cdf", []),
        "ttft_ms",
        "TTFT distribution (CDF) per stage · successful requests",
        "TTFT (ms, log scale)",
        "Markers at p50, p90 and p99; further right is slower. Hover for n and values.",
    )


def itl_cdf_figure(report: RunReport) -> go.Figure | None:
    """ITL CDF per stage, a line per provider × region (markers at p50, p90, p99)."""
    return _cdf_figure(
        report,
        report.plots.get("itl_cdf", []),
        "itl_ms",
        "Inter-token latency distribution (CDF) per stage · every gap of successful requests",
        "inter-token gap (ms, log scale)",
        "Markers at p50, p90 and p99. Gaps of 0 ms (tokens that came in one chunk) are off "
        "a log axis: a line then starts above 0 %.",
    )


def _series(report: RunReport, rows: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    return sorted({(str(r["provider"]), str(r["region"])) for r in rows})


def latency_throughput_figure(report: RunReport) -> go.Figure | None:
    """TTFT and ITL p50 (solid) and p99 (dashed) against aggregate output tok/s, per stage."""
    rows = [r for r in report.stages if r["output_tok_s"] and r["ttft_p50_ms"] is not None]
    if not rows:
        return None
    colours = palette(report)
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=["TTFT", "inter-token latency (ITL)"],
        horizontal_spacing=0.09,
    )
    for provider, region in _series(report, rows):
        mine = sorted(
            (r for r in rows if (r["provider"], r["region"]) == (provider, region)),
            key=lambda r: int(r["stage"]),
        )
        name = colours.name(provider, region)
        for col, metric in ((1, "ttft"), (2, "itl")):
            for label, dash, open_marker in (("p50", P50_DASH, ""), ("p99", P99_DASH, "-open")):
                column = f"{metric}_{label}_ms"
                points = [r for r in mine if r[column] is not None]
                fig.add_trace(
                    go.Scatter(
                        x=[r["output_tok_s"] for r in points],
                        y=[r[column] for r in points],
                        customdata=[
                            [stage_title(report, int(r["stage"])), _low(r, column)] for r in points
                        ],
                        mode="lines+markers",
                        name=f"{name} · {label}",
                        legendgroup=f"{name} · {label}",
                        showlegend=col == 1,
                        line={"color": colours.colour(provider, region), "dash": dash},
                        marker={
                            "symbol": colours.symbol(region) + open_marker,
                            "size": 9,
                            "color": colours.colour(provider, region),
                            "line": {"width": 2, "color": colours.colour(provider, region)},
                        },
                        hovertemplate=(
                            f"{name} · %{{customdata[0]}}<br>{metric.upper()} {label} "
                            "%{y:,.1f} ms%{customdata[1]}<br>"
                            "%{x:,.0f} output tok/s<extra></extra>"
                        ),
                    ),
                    row=1,
                    col=col,
                )
    fig.update_layout(
        base_layout(
            "Latency vs throughput across stages · p50 solid, p99 dashed (open markers)",
            480,
            "One point per stage; a line bending up is where more load buys latency, "
            "not throughput. Hover for the stage.",
        ),
        legend_title_text=colours.legend_title(" · percentile"),
    )
    fig.update_xaxes(axis("aggregate output tokens/s (steady window)", COUNT_TICKS))
    for col, metric in ((1, "ttft"), (2, "itl")):
        values = [r[f"{metric}_{q}_ms"] or 0.0 for r in rows for q in ("p50", "p99")]
        title = f"{metric.upper()} (ms, log scale)"
        fig.update_yaxes(axis(title, MS_TICKS, log=True, **log_ticks(values)), col=col)
    return fig


_ENDED_SYMBOL = {"saturated": "x", "stopped_early": "diamond"}


def sweep_figure(report: RunReport) -> go.Figure | None:
    """A sweep's curve (docs/answers.md): TTFT p50 (solid) and p99 (dashed) against the
    achieved request rate, one line per provider × region, its knee a large star;
    over-saturated points are crosses, stages stopped early diamonds."""
    sweeps = report.answers.get("sweep") or []
    if not sweeps:
        return None
    series = [(str(r["provider"]), str(r["region"])) for r in report.stages]
    colours = Palette.of([*series, *((str(s["provider"]), str(s["region"])) for s in sweeps)])
    fig = go.Figure()
    values: list[float] = []
    for sweep in sweeps:
        provider, region = str(sweep["provider"]), str(sweep["region"])
        name = colours.name(provider, region)
        colour = colours.colour(provider, region)
        points = sorted(
            (p for p in sweep["points"] if p["request_rate"] is not None),
            key=lambda p: float(p["request_rate"]),
        )
        for label, dash, key in (
            ("p50", P50_DASH, "ttft_p50_ms"),
            ("p99", P99_DASH, "ttft_p99_ms"),
        ):
            shown = [p for p in points if p[key] is not None]
            values += [float(p[key]) for p in shown]
            fig.add_trace(
                go.Scatter(
                    x=[p["request_rate"] for p in shown],
                    y=[p[key] for p in shown],
                    customdata=[[p["stage"], p["role"], p["outcome"] or ""] for p in shown],
                    mode="lines+markers",
                    name=f"{name} · {label}",
                    line={"color": colour, "dash": dash},
                    marker={
                        "symbol": [_ENDED_SYMBOL.get(p["outcome"] or "", colours.symbol(region))
                                   for p in shown],
                        "size": 9,
                        "color": colour,
                    },
                    hovertemplate=(
                        f"{name} · stage %{{customdata[0]}} (%{{customdata[1]}}) "
                        f"%{{customdata[2]}}<br>TTFT {label} %{{y:,.1f}} ms<br>"
                        "%{x:,.2f} req/s achieved<extra></extra>"
                    ),
                )
            )  # fmt: skip
        knee = sweep.get("knee")
        if knee and knee.get("ttft_p50_ms") is not None:
            fig.add_trace(
                go.Scatter(
                    x=[knee["request_rate"]],
                    y=[knee["ttft_p50_ms"]],
                    mode="markers",
                    name=f"{name} · knee",
                    marker={"symbol": "star", "size": 18, "color": colour,
                            "line": {"width": 1, "color": "#222"}},
                    hovertemplate=(
                        f"{name} · knee: stage {knee['stage']}<br>"
                        "TTFT p50 %{y:,.1f} ms at %{x:,.2f} req/s<extra></extra>"
                    ),
                )
            )  # fmt: skip
    fig.update_layout(
        base_layout(
            "Sweep: TTFT vs achieved request rate · p50 solid, p99 dashed, knee ★",
            480,
            "One point per stage (synchronous, throughput, then the open-loop rates between). "
            f"The knee is the fastest point whose median TTFT stays within "
            f"{sweeps[0]['knee_factor']:g}× the synchronous one; × over-saturated, "
            "◆ stopped early.",
        ),
        legend_title_text=colours.legend_title(" · percentile"),
    )
    fig.update_xaxes(axis("achieved requests/s (successful, steady window)", COUNT_TICKS))
    fig.update_yaxes(axis("TTFT (ms, log scale; from intent for open loop)", MS_TICKS, log=True,
                          **log_ticks(values)))  # fmt: skip
    return fig


def cost_figure(report: RunReport) -> go.Figure | None:
    """$/1M output tokens against p99 TTFT on log axes; Pareto-optimal points outlined."""
    points = [
        p
        for p in report.pareto
        if (p["cost_per_mtok_output"] or 0) > 0 and (p["ttft_p99_ms"] or 0) > 0
    ]
    if not points:
        return None
    colours = palette(report)
    fig = go.Figure()
    frontier = sorted((p for p in points if p["pareto"]), key=lambda p: p["cost_per_mtok_output"])
    fig.add_trace(
        go.Scatter(
            x=[p["cost_per_mtok_output"] for p in frontier],
            y=[p["ttft_p99_ms"] for p in frontier],
            mode="lines",
            name="Pareto frontier (outlined points)",
            line={"color": "#444", "dash": "dot", "width": 1.5, "shape": "hv"},
            hoverinfo="skip",
        )
    )
    for provider, region in _series(report, points):
        mine = [p for p in points if (p["provider"], p["region"]) == (provider, region)]
        name = colours.name(provider, region)
        fig.add_trace(
            go.Scatter(
                x=[p["cost_per_mtok_output"] for p in mine],
                y=[p["ttft_p99_ms"] for p in mine],
                customdata=[
                    [
                        stage_title(report, int(p["stage"])),
                        "* (too few samples: indicative)" if p["ttft_p99_low_sample"] else "",
                        " · Pareto-optimal" if p["pareto"] else "",
                    ]
                    for p in mine
                ],
                mode="markers",
                name=name,
                marker={
                    "symbol": colours.symbol(region),
                    "size": [15 if p["pareto"] else 11 for p in mine],
                    "color": colours.colour(provider, region),
                    "opacity": 0.85,  # regions often overlap: let the one below show
                    "line": {
                        "width": [2.5 if p["pareto"] else 0.5 for p in mine],
                        "color": ["#111" if p["pareto"] else "#fff" for p in mine],
                    },
                },
                hovertemplate=(
                    f"{name} · %{{customdata[0]}}%{{customdata[2]}}<br>"
                    "$%{x:,.4g} per 1M output tokens<br>"
                    "TTFT p99 %{y:,.1f} ms%{customdata[1]}<extra></extra>"
                ),
            )
        )
    fig.update_layout(
        base_layout(
            "Cost vs p99 TTFT · one point per stage × provider × region",
            480,
            "Lower left is better. Outlined points are Pareto-optimal: no other point is "
            "both cheaper and faster. Hover for the stage; * = p99 from too few samples.",
        ),
        legend_title_text=colours.legend_title(),
    )
    costs = [float(p["cost_per_mtok_output"]) for p in points]
    p99s = [float(p["ttft_p99_ms"]) for p in points]
    fig.update_xaxes(
        axis("USD per 1M output tokens (log scale)", USD_TICKS, log=True, **log_ticks(costs, 10))
    )
    fig.update_yaxes(axis("TTFT p99 (ms, log scale)", MS_TICKS, log=True, **log_ticks(p99s)))
    return fig


def region_figure(report: RunReport) -> go.Figure | None:
    """TTFT p50 and p99 per provider (columns) and stage, one bar per region."""
    rows = [r for r in report.stages if r["ttft_p50_ms"] is not None]
    if not rows:
        return None
    colours = palette(report)
    providers = sorted({str(r["provider"]) for r in rows})
    fig = make_subplots(
        rows=2,
        cols=len(providers),
        shared_yaxes=True,
        subplot_titles=providers,
        horizontal_spacing=0.03,
        vertical_spacing=0.12,
    )
    stages = sorted({int(r["stage"]) for r in rows})
    for col, provider in enumerate(providers, start=1):
        for region in colours.regions:
            mine = {
                int(r["stage"]): r
                for r in rows
                if (r["provider"], r["region"]) == (provider, region)
            }
            if not mine:
                continue
            name = colours.name(provider, region)
            for row, column in ((1, "ttft_p50_ms"), (2, "ttft_p99_ms")):
                present = [s for s in stages if s in mine and mine[s][column] is not None]
                fig.add_trace(
                    go.Bar(
                        x=[stage_title(report, s).removeprefix("stage ") for s in present],
                        y=[mine[s][column] for s in present],
                        customdata=[[_low(mine[s], column)] for s in present],
                        name=name,
                        legendgroup=name,
                        showlegend=row == 1,
                        marker={"color": colours.colour(provider, region)},
                        hovertemplate=(
                            f"{name} · stage %{{x}}<br>TTFT {column[5:8]} %{{y:,.1f}} ms"
                            "%{customdata[0]}<extra></extra>"
                        ),
                    ),
                    row=row,
                    col=col,
                )
    fig.update_layout(
        base_layout(
            "TTFT per provider, stage and region · p50 (top) and p99 (bottom)",
            580,
            "One bar per region; the same scale across providers."
            if len(colours.regions) > 1
            else f"One region ({colours.regions[0]}); the same scale across providers.",
        ),
        barmode="group",
        bargap=0.25,
        legend_title_text=colours.legend_title(),
    )
    fig.update_xaxes(axis("", COUNT_TICKS, type="category", showgrid=False))
    fig.update_xaxes(title_text="stage · concurrency", row=2)
    fig.update_yaxes(axis("", MS_TICKS, rangemode="tozero"))
    fig.update_yaxes(title_text="TTFT p50 (ms)", row=1, col=1)
    fig.update_yaxes(title_text="TTFT p99 (ms)", row=2, col=1)
    return fig


def _stage_bands(fig: go.Figure, report: RunReport, data: dict[str, Any]) -> None:
    """Shade every other stage and name it above the chart when there is room."""
    duration = float(data.get("duration_s") or 0.0)
    for index, span in enumerate(data.get("stages", [])):
        start, end = float(span["start_s"]), float(span["end_s"])
        if index % 2 == 0:
            fig.add_vrect(x0=start, x1=end, fillcolor="#f2f2f2", line_width=0, layer="below")
        if duration and (end - start) / duration >= 0.08:
            fig.add_annotation(
                x=(start + end) / 2,
                y=1.0,
                xref="x",
                yref="paper",
                yanchor="bottom",
                text=stage_title(report, int(span["stage"])),
                showarrow=False,
                font={"size": 11, "color": "#555"},
            )


def errors_figure(report: RunReport) -> go.Figure | None:
    """Error share per provider × region (top) and requests per outcome (bottom) over time."""
    data = report.plots.get("errors_over_time", {})
    counts: dict[str, list[int]] = data.get("counts", {})
    if not counts:
        return None
    colours = palette(report)
    buckets, duration = int(data["buckets"]), float(data["duration_s"] or 1.0)
    width = duration / buckets
    centres = [(i + 0.5) * width for i in range(buckets)]
    fig = make_subplots(
        rows=2, cols=1, shared_xaxes=True, row_heights=[0.45, 0.55], vertical_spacing=0.08
    )
    for series in data.get("series", []):
        provider, region = str(series["provider"]), str(series["region"])
        name = colours.name(provider, region)
        shares = [
            e / n if n else None for e, n in zip(series["errors"], series["requests"], strict=True)
        ]
        fig.add_trace(
            go.Scatter(
                x=centres,
                y=shares,
                customdata=list(zip(series["errors"], series["requests"], strict=True)),
                mode="lines+markers",
                connectgaps=False,
                name=name,
                legend="legend",
                line={"color": colours.colour(provider, region)},
                marker={
                    "symbol": colours.symbol(region),
                    "size": 7,
                    "color": colours.colour(provider, region),
                },
                hovertemplate=(
                    f"{name} · t≈%{{x:,.0f}} s<br>%{{y:.1%}} failed "
                    "(%{customdata[0]:,} of %{customdata[1]:,})<extra></extra>"
                ),
            ),
            row=1,
            col=1,
        )
    order = sorted(counts, key=lambda k: (k != "ok", k))
    for index, outcome in enumerate(order):
        fig.add_trace(
            go.Bar(
                x=centres,
                y=counts[outcome],
                width=width * 0.95,
                name=outcome,
                legend="legend2",
                marker={"color": OK_COLOUR if outcome == "ok" else error_colour(index - 1)},
                hovertemplate=(f"{outcome} · t≈%{{x:,.0f}} s<br>%{{y:,}} requests<extra></extra>"),
            ),
            row=2,
            col=1,
        )
    _stage_bands(fig, report, data)
    failed = sum(sum(v) for k, v in counts.items() if k != "ok")
    total = sum(sum(v) for v in counts.values())
    fig.update_layout(
        base_layout(
            f"Errors over time · {failed:,} of {total:,} requests failed "
            f"· {buckets} buckets of {width:,.3g} s",
            580,
            "Top: share of each series' requests that failed, per time bucket. Bottom: "
            "requests sent per bucket by outcome. Shaded bands: stages.",
        ),
        barmode="stack",
        bargap=0,
        legend={"title": {"text": colours.legend_title()}, "y": 1.0, "yanchor": "top"},
        legend2={
            "title": {"text": "outcome (bottom panel)"},
            "y": 0.45,
            "yanchor": "top",
            "itemsizing": "constant",
            "font": {"size": 12},
        },
    )
    fig.update_xaxes(axis("", COUNT_TICKS, range=[0, duration]))
    fig.update_xaxes(title_text="seconds since the run's first send (shaded: stages)", row=2)
    fig.update_yaxes(axis("failed share of requests", SHARE_TICKS, rangemode="tozero"), row=1)
    fig.update_yaxes(axis("requests sent per bucket", COUNT_TICKS), row=2)
    return fig


def server_telemetry_figure(report: RunReport) -> go.Figure | None:
    """Server queue depth and KV use against TTFT over time (analytics/render/telemetry_chart.py),
    with the errors chart's stage bands (the same clock)."""
    fig = telemetry_figure(report, palette(report))
    if fig is not None:
        spans = report.plots.get("errors_over_time", {}).get("stages", [])
        duration = report.plots.get("server_timeline", {}).get("duration_s", 0.0)
        _stage_bands(fig, report, {"duration_s": duration, "stages": spans})
    return fig


def ttft_decomposition_figure(report: RunReport) -> go.Figure | None:
    """Median TTFT split into server queue, server prefill and network + client: one
    stacked bar per stage, grouped by provider (docs/metrics.md, "Server timings").
    Only requests with joined server timings count; a stage with none has no bar."""
    rows = [r for r in report.server_timings if r["joined"]]
    if not rows or not any_joined(rows):
        return None
    colours = ("#8c6bb1", "#2b8cbe", "#bdbdbd")  # queue, prefill, network + client
    fig = go.Figure()
    x = [[str(r["provider"]) for r in rows], [f"stage {int(r['stage'])}" for r in rows]]
    for (part, label), colour in zip(PARTS, colours, strict=True):
        fig.add_trace(
            go.Bar(
                x=x,
                y=[r[f"{part}_p50_ms"] for r in rows],
                name=f"{label} (p50)",
                marker_color=colour,
                customdata=[[r[f"{part}_p99_ms"], r["joined_share"]] for r in rows],
                hovertemplate=(
                    f"{label}: p50 %{{y:,.1f}} ms · p99 %{{customdata[0]:,.1f}} ms"
                    "<br>joined %{customdata[1]:.0%} of requests<extra></extra>"
                ),
            )
        )
    fig.update_layout(
        base_layout(
            "Where the first token's time goes · p50 per stage",
            440,
            "Server queue and prefill as the server reported them (OTLP spans or the "
            "response itself); network + client is the client's TTFT minus the server's. "
            "Medians of each part: their sum is near, not equal to, the median TTFT.",
        ),
        barmode="stack",
    )
    fig.update_yaxes(axis("ms (p50 of each part)", MS_TICKS, rangemode="tozero"))
    return fig


# (anchor id, heading, builder): the report's charts in page order.
CHARTS = (
    ("ttft-cdf", "TTFT distribution", ttft_cdf_figure),
    ("itl-cdf", "Inter-token latency distribution", itl_cdf_figure),
    ("latency-throughput", "Latency vs throughput", latency_throughput_figure),
    ("cost", "Cost vs p99 TTFT", cost_figure),
    ("regions", "Regions compared", region_figure),
    ("errors", "Errors over time", errors_figure),
)
# Charts of data only some runs have, drawn after the others when they have it.
OPTIONAL_CHARTS = (
    ("server-telemetry", "Server queue and KV cache vs TTFT", server_telemetry_figure),
    ("ttft-decomposition", "Where the first token's time goes", ttft_decomposition_figure),
)


# Charts of a run's answers (docs/answers.md), first on the page; only a run that has them.
ANSWER_CHARTS = (("sweep-curve", "Sweep: latency vs throughput, knee marked", sweep_figure),)


@functools.cache
def plotly_js() -> str:
    """Plotly's JavaScript bundle (the package's own copy: nothing is fetched)."""
    return str(get_plotlyjs())


def figure_div(fig: go.Figure, div_id: str) -> str:
    """The figure as a ``<div>`` and the script that draws it (Plotly must be loaded)."""
    height = int(fig.layout.height or 450)
    return str(
        fig.to_html(
            full_html=False,
            include_plotlyjs=False,
            div_id=div_id,
            config=_CONFIG,
            default_width="100%",
            default_height=f"{height}px",
        )
    )


def chart_divs(report: RunReport) -> list[tuple[str, str, str]]:
    """(anchor id, heading, div) of every chart the report has data for, in page order."""
    out = []
    for anchor, heading, build in (*ANSWER_CHARTS, *CHARTS, *OPTIONAL_CHARTS):
        fig = build(report)
        if fig is not None:
            out.append((anchor, heading, figure_div(fig, f"chart-{anchor}")))
    return out
