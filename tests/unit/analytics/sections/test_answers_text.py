"""The answers as every format writes them: the capacity sentence heads the report, the
sweep's table marks its knee, the stages ended early say why and what they saved."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from analytics.render.charts import sweep_figure
from analytics.render.html_report import render_html
from analytics.render.markdown import render_markdown
from analytics.report.build import RunReport
from analytics.sections.answers_text import capacity_lines, ended_table, sweep_tables
from api.cli.console import print_report
from tests.support.terminal import terminal_tables

POINTS = [
    {"stage": 0, "role": "synchronous", "offered_rps": None, "request_rate": 2.0,
     "output_tok_s": 20.0, "ttft_p50_ms": 40.0, "ttft_p99_ms": 55.0, "outcome": None},
    {"stage": 1, "role": "throughput", "offered_rps": None, "request_rate": 20.0,
     "output_tok_s": 200.0, "ttft_p50_ms": 900.0, "ttft_p99_ms": 950.0, "outcome": None},
    {"stage": 2, "role": "sweep", "offered_rps": 8.0, "request_rate": 7.9,
     "output_tok_s": 79.0, "ttft_p50_ms": 60.0, "ttft_p99_ms": 140.0, "outcome": None},
    {"stage": 3, "role": "sweep", "offered_rps": 14.0, "request_rate": 11.0,
     "output_tok_s": 110.0, "ttft_p50_ms": 2000.0, "ttft_p99_ms": 4000.0,
     "outcome": "saturated"},
]  # fmt: skip
ANSWERS: dict[str, Any] = {
    "capacity": [{"answer": "gpu · eu: holds 7.5 req/s ± 1.5 at p99 TTFT ≤ 500 ms"}],
    "sweep": [
        {
            "provider": "gpu",
            "region": "eu",
            "knee_factor": 2.0,
            "points": POINTS,
            "knee": POINTS[2],
            "answer": "gpu · eu: knee at 7.9 req/s (stage 2, sweep)",
        }
    ],
    "ended": [
        {
            "stage": 3,
            "provider": "gpu",
            "outcome": "saturated",
            "acted": True,
            "reason": "eu: TTFT from intent rose",
            "requests_planned": 400,
            "requests_recorded": 90,
            "requests_saved": 310,
        }
    ],
    "requests_saved": 310,
    "notes": "sat: stopped as over-saturated",
}


def report() -> RunReport:
    return RunReport("run", "answers", "finished", [], [], answers=ANSWERS)


def test_the_text_tables_mark_the_knee_and_the_saturated_point() -> None:
    assert capacity_lines(ANSWERS) == ["gpu · eu: holds 7.5 req/s ± 1.5 at p99 TTFT ≤ 500 ms"]
    (sweep,) = sweep_tables(ANSWERS)
    assert sweep.caption == "gpu · eu: knee at 7.9 req/s (stage 2, sweep)"
    assert [row[0] for row in sweep.rows] == ["0", "1", "2 ◆ knee", "3"]
    assert sweep.rows[3][-1] == "saturated" and sweep.rows[2][2] == "8.00"
    ended = ended_table(ANSWERS)
    assert ended is not None and ended.rows[0][:6] == ["3", "gpu", "saturated", "90", "400", "310"]
    assert "310 planned requests not sent" in ended.caption
    assert ended_table({"ended": []}) is None and sweep_tables({}) == []


def test_the_capacity_answer_heads_markdown_and_html() -> None:
    markdown = render_markdown(report())
    assert markdown.split("\n## ")[1].startswith("Capacity\n\n- gpu · eu: holds 7.5 req/s")
    # The sweep follows the summary (a report without stage rows has no percentiles).
    assert markdown.index("## Summary") < markdown.index("## Sweep")
    assert "| 2 ◆ knee |" in markdown and "## Stages ended early" in markdown
    html = render_html(report())
    assert (
        html.index('id="capacity"')
        < html.index('<h2 id="summary">Summary</h2>')
        < html.index('id="sweep"')
    )
    assert 'id="chart-sweep-curve"' in html and "310 planned requests not sent" in html


def test_the_terminal_prints_the_answer_first() -> None:
    out = io.StringIO()
    print_report(Console(file=out, width=120), report(), "table")
    text = out.getvalue()
    assert text.startswith("Capacity\n  gpu · eu: holds 7.5 req/s")
    assert "◆ knee" in text and "stopped as over-saturated" in text
    assert (
        len(terminal_tables(report(), 80, "sweep", "ended", "answers-notes")) >= 3
    )  # the sweep, the ended stages, the note


def test_the_sweep_chart_stars_its_knee_and_crosses_the_saturated_point() -> None:
    fig = sweep_figure(report())
    assert fig is not None
    (knee,) = [t for t in fig.data if str(t.name).endswith("· knee")]
    assert (list(knee.x), list(knee.y), knee.marker.symbol) == ([7.9], [60.0], "star")
    p50 = next(t for t in fig.data if str(t.name).endswith("· p50"))
    # By achieved rate: 2, 7.9, 11 (stage 3, saturated: a cross), 20 (throughput).
    assert list(p50.marker.symbol)[2] == "x" and list(p50.x) == [2.0, 7.9, 11.0, 20.0]
    assert sweep_figure(RunReport("run", "n", "finished", [], [])) is None
