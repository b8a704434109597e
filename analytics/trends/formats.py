"""The trend report's document formats: JSON, markdown, CSV and an HTML chart over time.

One table of name → media type and renderer, as for the run report
(analytics/render/report_formats.py): ``GET /v1/trends`` and ``tokenbench trend --format``
serve exactly these. The terminal table is drawn by the command line
(api/cli/commands/trend.py) from the same rows and the same texts (analytics/trends/text.py).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from collections.abc import Callable
from typing import Any

from analytics.render.markdown import table
from analytics.render.report_formats import json_default
from analytics.trends.build import METRIC_BY_KEY, METRICS, TrendReport, created
from analytics.trends.text import JUDGEMENT_HEADER, judgement_cells, span_note

HISTORY_HEADER = (
    "created (UTC)",
    "run",
    "provider",
    "region",
    "stage",
    *(m.title for m in METRICS),
)


@dataclasses.dataclass(frozen=True, slots=True)
class TrendFormat:
    """A way to write a trend report as a document."""

    name: str
    media_type: str
    render: Callable[[TrendReport], str]


def history_rows(report: TrendReport) -> list[list[str]]:
    """One line per run × provider × region × stage: the five figures."""
    values: dict[tuple[str, str, str, int], dict[str, str]] = {}
    for p in report.points:
        key = (p["run_id"], p["provider"], p["region"], p["stage"])
        text = METRIC_BY_KEY[p["metric"]].text(p["value"]) + ("*" if p["low_sample"] else "")
        values.setdefault(key, {})[p["metric"]] = text
    when = {r["run_id"]: created(r["created_at"]) for r in report.runs}
    order = {r["run_id"]: i for i, r in enumerate(report.runs)}
    # An imported run is marked by its tool (docs/import.md).
    tool = {r["run_id"]: r.get("tool", "tokenbench") for r in report.runs}
    named = {run: run if t == "tokenbench" else f"{run} ({t})" for run, t in tool.items()}
    return [
        [
            when[run],
            named[run],
            provider,
            region,
            str(stage),
            *(cells.get(m.key, "–") for m in METRICS),
        ]
        for (run, provider, region, stage), cells in sorted(
            values.items(), key=lambda item: (order[item[0][0]], item[0][1:])
        )
    ]


def render_json(report: TrendReport) -> str:
    """The trend as one JSON document (``TrendReport.to_dict``)."""
    return json.dumps(report.to_dict(), default=json_default, ensure_ascii=False)


def _text(text: str) -> str:
    # A title holds what a client asked for (a scenario name): shown, never rendered.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def render_markdown(report: TrendReport) -> str:
    """The trend as markdown: regressions, the latest run against its window, history."""
    out = [f"# {_text(report.title)}", "", span_note(report), ""]
    if report.runs:
        out += ["## Regressions", ""]
        regressions = report.regressions
        out += [
            f"- {r['provider']} · {r['region']} · stage {r['stage']}: {r['verdict']}"
            for r in regressions
        ] or ["- none in the latest run"]
        out += ["", "## Latest run against the trailing window", ""]
        out.append(
            table(
                JUDGEMENT_HEADER,
                [judgement_cells(report, r) for r in report.rows],
                [False, False, True, False, False, True, True, True, False],
            )
        )
        out += ["", "## History", ""]
        out.append(
            table(
                HISTORY_HEADER,
                history_rows(report),
                [False, False, False, False, True] + [True] * len(METRICS),
            )
        )
    return "\n".join(out) + "\n"


_CSV_FIELDS = (
    "run_id", "created_at", "provider", "region", "stage", "metric", "value", "ci_low",
    "ci_high", "low_sample", "latest", "window_runs", "window_mean", "band_low", "band_high",
    "regression",
)  # fmt: skip


def _csv_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return json_default(value) if not isinstance(value, int | float | str) else str(value)


def render_csv(report: TrendReport) -> str:
    """One line per run × provider × region × stage × metric, raw values; the latest
    run's line of each series also carries the verdict's window, band and flag."""
    judged = {
        (r["provider"], r["region"], r["stage"], r["metric"], r["latest_run_id"]): r
        for r in report.rows
    }
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(_CSV_FIELDS)
    for p in report.points:
        row = judged.get((p["provider"], p["region"], p["stage"], p["metric"], p["run_id"]))
        verdict = {
            "latest": row is not None,
            "window_runs": row["window_runs"] if row else None,
            "window_mean": row["window_mean"] if row else None,
            "band_low": row["band_low"] if row else None,
            "band_high": row["band_high"] if row else None,
            "regression": row["regression"] if row else None,
        }
        merged = {**p, **verdict}
        writer.writerow([_csv_value(merged.get(name)) for name in _CSV_FIELDS])
    return out.getvalue()


def _render_html(report: TrendReport) -> str:
    # Plotly loads in ~0.1 s: only a process that draws a chart pays for it.
    from analytics.trends.chart import render_html  # noqa: PLC0415

    return render_html(report)


# The first is the default: what a client gets when it names no format.
TREND_FORMATS: dict[str, TrendFormat] = {
    fmt.name: fmt
    for fmt in (
        TrendFormat("json", "application/json", render_json),
        TrendFormat("markdown", "text/markdown", render_markdown),
        TrendFormat("html", "text/html", _render_html),
        TrendFormat("csv", "text/csv", render_csv),
    )
}
