"""The HTML report's charts and KPI cards against the records they were drawn from.

A real DuckDB file with generated records (3 providers × 2 regions × 2 stages, failures in
two series): the chart data must be the records' own quantiles and counts, each series
keeps one colour in every chart, p50 and p99 differ in style and legend, cost and latency
axes are logarithmic with 1-2-3-5 ticks around the data, and every axis has a fixed tick
format.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np
import pytest

from analytics.render.chart_style import log_ticks
from analytics.render.charts import (
    CHARTS,
    cost_figure,
    errors_figure,
    itl_cdf_figure,
    latency_throughput_figure,
    palette,
    region_figure,
    ttft_cdf_figure,
)
from analytics.render.html_report import render_html
from analytics.render.kpi import provider_kpis
from analytics.report.build import RunReport, build_report
from analytics.report.formatting import money, number
from analytics.report.plots import cdf_fractions
from tests.support.builders import MS
from tests.support.builders import REPORT_SCENARIO as SCENARIO
from tests.support.regional_run import (
    FAILURES,
    PROVIDERS,
    REGIONS,
    Key,
    open_read_only,
    store_regional_run,
)
from workers.client.result import RequestResult


@pytest.fixture(scope="module")
def run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[RunReport, dict[Key, list[RequestResult]]]:
    path = tmp_path_factory.mktemp("charts") / "runs.duckdb"
    shards = store_regional_run(path)
    with open_read_only(path) as con:
        return build_report(con, "run"), shards


def _ttft(r: RequestResult) -> float:
    return (r.first_token - r.sent) / MS  # type: ignore[operator]


def _axes(fig: Any) -> dict[str, Any]:
    layout = fig.to_plotly_json()["layout"]
    return {k: v for k, v in layout.items() if k.startswith(("xaxis", "yaxis"))}


def test_cdf_data_are_the_records_quantiles(
    run: tuple[RunReport, dict[Key, list[RequestResult]]],
) -> None:
    report, shards = run
    fractions = cdf_fractions()
    for metric, values_of in (
        ("ttft", lambda rs: [_ttft(r) for r in rs if r.ok]),
        ("itl", lambda rs: [g / MS for r in rs if r.ok for g in r.itl_gaps()]),
    ):
        cdfs = report.plots[f"{metric}_cdf"]
        assert len(cdfs) == len(shards)
        for cdf in cdfs:
            values = values_of(shards[(cdf["provider"], cdf["region"], cdf["stage"])])
            assert cdf["n"] == len(values)
            expected = np.quantile(values, fractions)
            assert cdf[f"{metric}_ms"] == pytest.approx(list(expected), abs=1e-6), metric


def test_cdf_charts_draw_a_line_per_stage_provider_region(
    run: tuple[RunReport, dict[Key, list[RequestResult]]],
) -> None:
    report, _ = run
    for figure, key, metric in ((ttft_cdf_figure, "ttft_cdf", "ttft"),
                                (itl_cdf_figure, "itl_cdf", "itl")):  # fmt: skip
        fig = figure(report)
        cdfs = report.plots[key]
        assert len(fig.data) == len(cdfs)
        for trace, cdf in zip(fig.data, cdfs, strict=True):
            assert trace.name == f"{cdf['provider']} · {cdf['region']}"
            # A log axis cannot show 0 ms: those gaps are left out, the rest drawn as is.
            positive = [
                (x, y) for x, y in zip(cdf[f"{metric}_ms"], cdf["fractions"], strict=True) if x > 0
            ]
            assert list(trace.x) == [x for x, _ in positive]
            assert list(trace.y) == [y for _, y in positive]
        # One legend entry per provider × region, not one per panel.
        assert sum(1 for t in fig.data if t.showlegend is not False) == len(PROVIDERS) * len(
            REGIONS
        )
    # The ITL data have 0 ms gaps, so those lines start above 0 %.
    assert any(min(t.y) > 0 for t in itl_cdf_figure(report).data)


def test_every_series_has_one_colour_in_every_chart_and_pairs_differ(
    run: tuple[RunReport, dict[Key, list[RequestResult]]],
) -> None:
    report, _ = run
    colours: dict[str, set[str]] = {}
    for _, _, build in CHARTS:
        for trace in build(report).data:
            pair = " · ".join(str(trace.name).split(" · ")[:2])
            if pair.split(" · ")[0] in PROVIDERS:
                colours.setdefault(pair, set()).add(trace.marker.color)
                if trace.type == "scatter" and "lines" in trace.mode:
                    colours[pair].add(trace.line.color)
    assert len(colours) == len(PROVIDERS) * len(REGIONS)
    assert all(len(c) == 1 for c in colours.values()), colours
    assert len({next(iter(c)) for c in colours.values()}) == len(colours)
    # Regions differ by marker too, and the legends say so.
    shapes = palette(report)
    assert len({shapes.symbol(r) for r in REGIONS}) == len(REGIONS)
    assert "shade + marker = region" in shapes.legend_title()


def test_latency_vs_throughput_tells_p50_from_p99(
    run: tuple[RunReport, dict[Key, list[RequestResult]]],
) -> None:
    report, _ = run
    fig = latency_throughput_figure(report)
    legend = [t for t in fig.data if t.showlegend is not False]
    assert len(legend) == len(PROVIDERS) * len(REGIONS) * 2
    for trace in fig.data:
        provider, region, label = str(trace.name).split(" · ")
        assert trace.line.dash == {"p50": "solid", "p99": "dash"}[label]
        assert trace.marker.symbol.endswith("-open") == (label == "p99")
        metric = "ttft" if trace.yaxis == "y" else "itl"
        rows = sorted(
            (r for r in report.stages if (r["provider"], r["region"]) == (provider, region)),
            key=lambda r: r["stage"],
        )
        assert list(trace.y) == [r[f"{metric}_{label}_ms"] for r in rows]
        assert list(trace.x) == [r["output_tok_s"] for r in rows]
    assert "p50 solid, p99 dashed" in fig.layout.title.text


def test_cost_chart_is_log_log_with_the_pareto_points_outlined(
    run: tuple[RunReport, dict[Key, list[RequestResult]]],
) -> None:
    report, _ = run
    fig = cost_figure(report)
    axes = _axes(fig)
    assert axes["xaxis"]["type"] == axes["yaxis"]["type"] == "log"
    assert axes["xaxis"]["tickformat"].startswith("$")
    points = [t for t in fig.data if t.mode == "markers"]
    plotted = sorted((x, y) for t in points for x, y in zip(t.x, t.y, strict=True))
    assert plotted == sorted((p["cost_per_mtok_output"], p["ttft_p99_ms"]) for p in report.pareto)
    (frontier,) = [t for t in fig.data if t.mode == "lines"]
    optimal = sorted(
        (p["cost_per_mtok_output"], p["ttft_p99_ms"]) for p in report.pareto if p["pareto"]
    )
    assert list(zip(frontier.x, frontier.y, strict=True)) == optimal
    # Every point is inside the range and between two labelled ticks.
    for name, values in (("xaxis", [x for x, _ in plotted]), ("yaxis", [y for _, y in plotted])):
        ticks, (lo, hi) = axes[name]["tickvals"], axes[name]["range"]
        assert min(ticks) <= min(values) and max(values) <= max(ticks)
        assert lo < math.log10(min(values)) and math.log10(max(values)) < hi
    # Labels come from hover text and the legend, never from annotations that can collide.
    assert not fig.layout.annotations


def test_region_chart_has_each_rows_p50_and_p99(
    run: tuple[RunReport, dict[Key, list[RequestResult]]],
) -> None:
    report, _ = run
    fig = region_figure(report)
    assert len(fig.data) == len(PROVIDERS) * len(REGIONS) * 2
    for trace in fig.data:
        provider, region = str(trace.name).split(" · ")
        rows = sorted(
            (r for r in report.stages if (r["provider"], r["region"]) == (provider, region)),
            key=lambda r: r["stage"],
        )
        column = "ttft_p50_ms" if trace.yaxis in {"y", "y2", "y3"} else "ttft_p99_ms"
        assert list(trace.y) == [r[column] for r in rows]
        assert list(trace.x) == [f"{r['stage']} · c={r['concurrency']}" for r in rows]


def test_errors_over_time_counts_every_request(
    run: tuple[RunReport, dict[Key, list[RequestResult]]],
) -> None:
    report, shards = run
    fig = errors_figure(report)
    bars = {t.name: sum(t.y) for t in fig.data if t.type == "bar"}
    failures = Counter(e.value for errors in FAILURES.values() for e in errors)
    ok = sum(1 for results in shards.values() for r in results if r.ok)
    assert bars == {"ok": ok, **failures}
    lines = {t.name: t for t in fig.data if t.type == "scatter"}
    assert len(lines) == len(PROVIDERS) * len(REGIONS)
    for (provider, region, _), errors in FAILURES.items():
        series = next(
            s for s in report.plots["errors_over_time"]["series"]
            if (s["provider"], s["region"]) == (provider, region)
        )  # fmt: skip
        assert sum(series["errors"]) == len(errors)
        shares = lines[f"{provider} · {region}"].y
        assert all(
            (share is None and n == 0) or share == pytest.approx(e / n)
            for share, e, n in zip(shares, series["errors"], series["requests"], strict=True)
        )
    spans = report.plots["errors_over_time"]["stages"]
    starts = {
        stage: min(r.sent for (_, _, s), rs in shards.items() if s == stage for r in rs)
        for stage in (0, 1)
    }
    first = min(starts.values())
    assert [s["start_s"] for s in spans] == pytest.approx(
        [(starts[s] - first) / 1e9 for s in (0, 1)]
    )


def test_every_axis_has_a_tick_format_and_log_axes_their_ticks(
    run: tuple[RunReport, dict[Key, list[RequestResult]]],
) -> None:
    report, _ = run
    for anchor, _, build in CHARTS:
        axes = _axes(build(report))
        assert axes, anchor
        for name, axis in axes.items():
            assert axis.get("tickformat"), (anchor, name)
            if axis.get("type") == "log":
                assert axis.get("tickvals"), (anchor, name)
        titles = " ".join(str(a.get("title", {}).get("text", "")) for a in axes.values())
        assert any(unit in titles for unit in ("(ms", "USD", "tokens/s", "share", "requests")), (
            anchor
        )


@pytest.mark.parametrize(
    "values",
    [[401.0, 409.0], [1.2, 359.0], [70.0, 1100.0], [0.5, 3.0], [1.0, 1e7], [0.02, 0.05], [7.0]],
)
def test_log_ticks_are_few_round_and_around_the_data(values: list[float]) -> None:
    axis = log_ticks([*values, 0.0, -1.0], most=7)  # non-positive values are ignored
    ticks, (lo, hi) = axis["tickvals"], axis["range"]
    shown = [t for t in ticks if lo <= math.log10(t) <= hi]
    assert 1 <= len(shown) <= 7
    mantissas = {round(t / 10 ** math.floor(math.log10(t) + 1e-9), 6) for t in ticks}
    assert mantissas <= {1, 2, 3, 4, 5, 6, 7, 8, 9}
    # The data fit, with room but not much more.
    assert lo < math.log10(min(values)) and math.log10(max(values)) < hi
    assert hi - lo <= math.log10(max(values) / min(values)) + 2 * 0.4
    if mantissas != {1}:  # with 1-2-5 ticks or denser, a labelled tick on either side
        assert shown[0] <= min(values) and max(values) <= shown[-1]
    assert log_ticks([0.0]) == {}


def test_kpi_cards_are_the_rows_figures(
    run: tuple[RunReport, dict[Key, list[RequestResult]]],
) -> None:
    report, shards = run
    slo = SCENARIO["slo"]
    for provider in PROVIDERS:
        kpis = {k.label: k for k in provider_kpis(report, provider)}
        rows = [r for r in report.stages if r["provider"] == provider]
        best = min(rows, key=lambda r: r["ttft_p50_ms"])
        flag = "*" if "ttft_p50_ms" in best["low_sample"] else ""
        assert kpis["TTFT p50, best stage"].value == f"{number(best['ttft_p50_ms'])}{flag} ms"
        assert kpis["TTFT p50, best stage"].detail == (
            f"stage {best['stage']} · c={best['concurrency']} · {best['region']}"
        )
        fastest = max(r["output_tok_s"] for r in rows)
        assert kpis["output tok/s, best stage"].value == number(fastest, 0)
        cheapest = min(r["cost_per_mtok_output"] for r in rows)
        assert kpis["$ per 1M output tokens, lowest"].value == money(cheapest)
        # Error rate and SLO attainment over the provider's own records.
        results = [r for (p, _, _), rs in shards.items() if p == provider for r in rs]
        failed = sum(1 for r in results if not r.ok)
        assert kpis["error rate, all stages"].value == f"{failed / len(results):.1%}"
        met = sum(
            1
            for r in results
            if r.ok
            and _ttft(r) <= slo["ttft_ms"]
            and (r.last_token - r.first_token) / MS / (r.completion_tokens - 1) <= slo["tpot_ms"]  # type: ignore[operator]
        )
        assert kpis["SLO met, all stages"].value == f"{met / len(results):.1%}"


def test_the_page_has_a_card_per_provider_and_every_chart(
    run: tuple[RunReport, dict[Key, list[RequestResult]]],
) -> None:
    report, _ = run
    html = render_html(report)
    assert html.count('class="kpi"') == len(PROVIDERS)
    assert html.count('class="plotly-graph-div"') == len(CHARTS)
    assert html.index('class="kpis"') < html.index('<h2 id="summary">Summary</h2>')


def test_ttft_decomposition_stacks_the_three_parts_per_stage() -> None:
    from analytics.render.charts import ttft_decomposition_figure
    from tests.support.sample_report import report as sample_report

    def row(stage: int, joined: int, queue: float | None) -> dict[str, Any]:
        figures = {f"{part}_{q}_ms": queue for part in ("queue", "prefill", "network_client")
                   for q in ("p50", "p99")}  # fmt: skip
        return {"provider": "vllm", "stage": stage, "requests": 4, "joined": joined,
                "joined_share": joined / 4, "client_ttft_p50_ms": 9.0, **figures}  # fmt: skip

    fig = ttft_decomposition_figure(sample_report(server_timings=[row(0, 4, 1.0), row(1, 0, None)]))
    assert fig is not None and fig.layout.barmode == "stack"
    assert [trace.name for trace in fig.data] == [
        "server queue (p50)",
        "server prefill (p50)",
        "network + client (p50)",
    ]
    assert all(
        list(trace.y) == [1.0] for trace in fig.data
    )  # the stage with nothing joined: no bar
    assert ttft_decomposition_figure(sample_report(server_timings=[row(0, 0, None)])) is None
