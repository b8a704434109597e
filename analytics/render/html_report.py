"""The report as one self-contained HTML file: KPI cards, tables, verdicts and charts.

No script, stylesheet, font or image is fetched: Plotly's JavaScript is inlined once in
the page, so the file opens offline and can be attached to a ticket as is. The charts
(analytics/render/charts.py) are interactive: hover for values, click a legend entry to hide it.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from analytics.render.answers_text import (
    CAPACITY_TITLE,
    ENDED_TITLE,
    SWEEP_TITLE,
    capacity_lines,
    ended_table,
    sweep_tables,
)
from analytics.render.charts import chart_divs, palette, plotly_js
from analytics.render.kpi import CARD_STYLE, kpi_cards
from analytics.report.build import RunReport
from analytics.report.columns import columns
from analytics.report.failover import failover_sections
from analytics.report.formatting import (
    CAPTION,
    LOW_SAMPLE_NOTE,
    PERCENTILE_HEADER,
    PERCENTILE_KEYS,
    method_note,
    money,
    number,
    percentile_rows,
)
from analytics.report.sessions import (
    ENDS_HEADER,
    ENDS_TITLE,
    TURNS_HEADER,
    TURNS_NOTE,
    TURNS_TITLE,
    end_rows,
    turn_rows,
)
from analytics.report.top_errors import ERRORS_HEADER, ERRORS_NOTE, ERRORS_TITLE, error_rows
from analytics.telemetry.metrics import (
    TELEMETRY_HEADER,
    TELEMETRY_NOTE,
    TELEMETRY_NUMERIC,
    TELEMETRY_TITLE,
    telemetry_rows,
)

_STYLE = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;font-size:11.5px;margin:8px 0}
th,td{border:1px solid #ddd;padding:2px 4px}
th{background:#f4f4f4;vertical-align:bottom}td{white-space:nowrap}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:normal}
.wide{overflow-x:auto}.note{color:#666;font-size:12px}
.chart{margin:8px 0 20px;border-top:1px solid #eee}
.answer{background:#f3f8ff;border-left:4px solid #2b6cb0;padding:6px 12px;margin:8px 0}
.answer li{margin:4px 0;font-size:14px}
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


def _capacity(report: RunReport) -> str:
    """The capacity answers, heading the page."""
    lines = capacity_lines(report.answers)
    if not lines:
        return ""
    items = "".join(f"<li>{escape(line)}</li>" for line in lines)
    return f'<h2 id="capacity">{CAPACITY_TITLE}</h2><ul class="answer">{items}</ul>'


def _sweep_and_ends(report: RunReport) -> str:
    """The sweep's curve as tables (knee marked) and the stages ended early."""
    out = ""
    for sweep in sweep_tables(report.answers):
        caption = f'<p class="answer">{escape(sweep.caption)}</p>'
        out += f'<h2 id="sweep">{escape(SWEEP_TITLE)}</h2>{caption}'
        out += _table(sweep.header, sweep.rows, sweep.numeric)
    ended = ended_table(report.answers)
    if ended is not None:
        out += (
            f'<h2 id="ended">{escape(ENDED_TITLE)}</h2><p class="note">{escape(ended.caption)}</p>'
            + _table(ended.header, ended.rows, ended.numeric)
        )
    if note := report.answers.get("notes"):
        out += f'<p class="note">{escape(str(note))}</p>'
    return out


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


def _errors(report: RunReport) -> str:
    if not report.errors:
        return ""
    rows = error_rows(report.errors, report.stages)
    return (
        f'<h2 id="errors">{escape(ERRORS_TITLE)}</h2>'
        + _table(ERRORS_HEADER, rows, [False, True, False, True, False, False])
        + f'<p class="note">{escape(ERRORS_NOTE)}</p>'
    )


def _sessions(report: RunReport) -> str:
    if not report.session_turns:
        return ""
    turns = _table(
        TURNS_HEADER,
        turn_rows(report.session_turns),
        [False, True, False] + [True] * (len(TURNS_HEADER) - 3),
    )
    ends = _table(
        ENDS_HEADER,
        end_rows(report.sessions),
        [False, True, False] + [True] * (len(ENDS_HEADER) - 3),
    )
    return (
        f'<h2 id="sessions">{escape(TURNS_TITLE)}</h2>{turns}'
        f'<p class="note">{escape(TURNS_NOTE)}</p><h3>{escape(ENDS_TITLE)}</h3>{ends}'
    )


def _telemetry(report: RunReport) -> str:
    rows = telemetry_rows(report.server_metrics)
    if not rows:
        return ""
    return (
        f'<h2 id="server-metrics">{escape(TELEMETRY_TITLE)}</h2>'
        + _table(TELEMETRY_HEADER, rows, TELEMETRY_NUMERIC)
        + f'<p class="note">{escape(TELEMETRY_NOTE)}</p>'
    )


def _failover(report: RunReport) -> str:
    out = []
    for section in failover_sections(report.failover, report.upstreams, report.upstream_logs):
        table = _table(list(section.header), section.rows, section.numeric)
        out.append(f"<h2>{escape(section.title)}</h2>{table}")
        if section.note:
            out.append(f'<p class="note">{escape(section.note)}</p>')
    return "".join(out)


def render_html(report: RunReport) -> str:
    """The whole report as one HTML document."""
    title = f"tokenbench run {report.run_id} · {report.name} · {report.state}"
    shown = columns("summary")
    summary = _table(
        [c.title(interval=True) for c in shown],
        [[c.text(row, interval=True) for c in shown] for row in report.stages],
        [c.numeric for c in shown],
    )
    percentiles = _table(
        PERCENTILE_HEADER,
        percentile_rows(report.stages),
        [False] * PERCENTILE_KEYS + [True] * (len(PERCENTILE_HEADER) - PERCENTILE_KEYS),
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
    charts = "".join(
        f'<section class="chart" id="{anchor}" aria-label="{escape(heading)}">{div}</section>'
        for anchor, heading, div in chart_divs(report)
    )
    slo = ", ".join(f"{k} ≤ {v:g}" for k, v in report.slo.items() if v is not None) or "none"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{_STYLE}{CARD_STYLE}</style>"
        f'<script type="text/javascript">{plotly_js()}</script></head><body>'
        f"<h1>{escape(title)}</h1>"
        f"{_capacity(report)}"
        f'<p class="note">SLO: {escape(slo)}. {escape(CAPTION)}.</p>'
        f"{kpi_cards(report, palette(report))}"
        f"<h2>Summary</h2>{summary}"
        f'<p class="note">{escape(LOW_SAMPLE_NOTE)} {escape(method_note(report.percentiles))}</p>'
        f"{_sweep_and_ends(report)}"
        f"{_errors(report)}"
        f"{_sessions(report)}"
        f"{_telemetry(report)}"
        f"{_failover(report)}"
        f"{_comparison(report)}"
        f'<h2>Charts</h2><p class="note">Interactive: hover for values, drag to zoom, '
        f"double-click to reset, click a legend entry to hide it.</p>{charts}"
        f"<h2>Latency percentiles, mean and standard deviation (ms)</h2>{percentiles}"
        + (f"<h2>Cost vs p99 TTFT</h2>{pareto}" if report.pareto else "")
        + "</body></html>\n"
    )
