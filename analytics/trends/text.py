"""The trend report's judgements as text, the same in every format that shows them.

The terminal table (api/cli/commands/trend.py), the markdown (analytics/trends/formats.py) and the
HTML page (analytics/trends/chart.py) write a judgement row with :func:`judgement_cells`
under :data:`JUDGEMENT_HEADER`, and say what was judged with :func:`span_note`. Both
formats and chart read this module, and neither reads the other's text.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from analytics.trends.build import METRIC_BY_KEY, TrendReport, created

SPARKS = "▁▂▃▄▅▆▇█"
JUDGEMENT_HEADER = (
    "provider", "region", "stage", "metric", "last runs", "latest", "95 % band", "change",
    "verdict",
)  # fmt: skip
# Runs a sparkline shows.
SPARK_RUNS = 8


def sparkline(values: Sequence[float | None]) -> str:
    """One character per value, scaled from the lowest to the highest (a gap for none)."""
    known = [v for v in values if v is not None]
    if not known:
        return ""
    low, high = min(known), max(known)
    span = high - low
    return "".join(
        " "
        if v is None
        else SPARKS[0 if span == 0 else round((v - low) / span * (len(SPARKS) - 1))]
        for v in values
    )


def history(report: TrendReport, row: dict[str, Any], last: int = SPARK_RUNS) -> str:
    """The sparkline of a row's values over its last ``last`` runs."""
    values = [
        p["value"]
        for p in report.points
        if p["metric"] == row["metric"]
        and (p["provider"], p["region"], p["stage"])
        == (row["provider"], row["region"], row["stage"])
    ]
    return sparkline(values[-last:])


def band_text(row: dict[str, Any]) -> str:
    """The trailing window's 95 % band for the latest value: ``22.2–22.9``."""
    metric = METRIC_BY_KEY[row["metric"]]
    low, high = row["band_low"], row["band_high"]
    if low is None or high is None:
        return "–"
    if metric.key == "error_rate":
        return f"{100 * low:.1f}–{100 * high:.1f} %"
    return f"{metric.text(low)}–{metric.text(high).lstrip('$')}"


def short_verdict(row: dict[str, Any]) -> str:
    """``REGRESSION``, ``ok``, ``better``, ``not judged``."""
    if row["regression"]:
        return "REGRESSION"
    if not row["judged"]:
        return "not judged"
    return str(row["verdict"]).split(":", 1)[0]


def judgement_cells(report: TrendReport, row: dict[str, Any]) -> list[str]:
    """A judgement row as text, in :data:`JUDGEMENT_HEADER` order."""
    metric = METRIC_BY_KEY[row["metric"]]
    latest = metric.text(row["latest"]) + ("*" if row["latest_low_sample"] else "")
    return [
        str(row["provider"]),
        str(row["region"]),
        str(row["stage"]),
        metric.short,
        history(report, row),
        latest,
        band_text(row),
        str(row["change_text"]),
        short_verdict(row),
    ]


def span_note(report: TrendReport) -> str:
    """Which runs, when, and how the latest is judged."""
    if not report.runs:
        return "No ended run yet."
    first, last = report.runs[0], report.runs[-1]
    options = report.options
    tools = Counter(str(r.get("tool", "tokenbench")) for r in report.runs)
    by_tool = (
        " (" + ", ".join(f"{n} by {tool}" for tool, n in sorted(tools.items())) + ")"
        if set(tools) != {"tokenbench"}
        else ""
    )
    return (
        f"{len(report.runs)} ended runs{by_tool}, {created(first['created_at'])} → "
        f"{created(last['created_at'])} UTC; the latest run ({last['run_id']}) is judged "
        f"against up to {options['window']} earlier runs: a regression lies outside their "
        f"95 % band in the harmful direction and moves by at least "
        f"{100 * options['min_change']:.0f} % of their mean (error rate: and 1 pp). TTFT in "
        f"ms; last runs: the last {SPARK_RUNS}, low to high. * too few samples for this "
        "percentile: shown, not judged (docs/tracking.md)."
    )
