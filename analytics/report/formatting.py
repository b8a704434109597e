"""How report values are written as text, shared by every format (table, markdown, HTML);
the summary columns that use them are registered in analytics/report/columns.py.

A percentile whose sample cannot support it (``analytics.stats.percentiles.supported``) is written
with a trailing ``*``; a footnote in each format says what it means.
"""

from __future__ import annotations

from typing import Any

from analytics.stats.percentiles import QUANTILES, TAIL_SAMPLES

LOW_SAMPLE_NOTE = (
    f"* fewer than {TAIL_SAMPLES} samples beyond this percentile (n < {TAIL_SAMPLES}/(1−q)): "
    "indicative only"
)


def method_note(percentiles: dict[str, Any]) -> str:
    """How the report's percentiles were computed, for a footnote ("" when exact)."""
    note = percentiles.get("note")
    return f"Percentiles: {note}." if note else ""


LATENCY_METRICS = (
    ("ttft", "TTFT"),
    ("itl", "ITL"),
    ("tpot", "TPOT"),
    ("e2e", "E2E"),
    ("ttft_intent", "TTFT from intent"),
    ("e2e_intent", "E2E from intent"),
)
PERCENTILE_LABELS = tuple(label for label, _ in QUANTILES)
PERCENTILE_TITLES = {"p50": "p50", "p90": "p90", "p95": "p95", "p99": "p99", "p999": "p99.9"}


def number(value: Any, digits: int = 1) -> str:
    """A number with thousands separators, or an en dash for missing."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def percentile(row: dict[str, Any], column: str, digits: int = 1, ci: bool = False) -> str:
    """A percentile cell: value, ``*`` when flagged, and ``[low–high]`` when asked and known."""
    text = number(row.get(column), digits)
    if column in row.get("low_sample", ()):
        text += "*"
    if ci:
        stem = column.removesuffix("_ms")
        low, high = row.get(f"{stem}_ci_low_ms"), row.get(f"{stem}_ci_high_ms")
        if low is not None and high is not None:
            text += f" [{low:,.{digits}f}–{high:,.{digits}f}]"
    return text


def money(value: Any) -> str:
    """USD with precision that suits its size."""
    if value is None:
        return "–"
    return f"${value:,.2f}" if value >= 1 else f"${value:,.4f}"


def errors(row: dict[str, Any]) -> str:
    """Error count with its classes."""
    if not row["errors"]:
        return "0"
    return f"{row['errors']} ({row['errors_by_class']})"


def _interval(row: dict[str, Any], metric: str, label: str, digits: int) -> str:
    low, high = row.get(f"{metric}_{label}_ci_low_ms"), row.get(f"{metric}_{label}_ci_high_ms")
    if low is None or high is None:
        return "–"
    return f"{low:,.{digits}f}–{high:,.{digits}f}"


def percentile_rows(stages: list[dict[str, Any]]) -> list[list[str]]:
    """One line per row × latency metric with a sample: the five percentiles, the mean,
    the standard deviation and the p50 and p99 intervals (ms), after its row keys,
    metric and sample size (:data:`PERCENTILE_HEADER`)."""
    lines = []
    for row in stages:
        for metric, title in LATENCY_METRICS:
            if not row.get(f"{metric}_n"):
                continue
            digits = 2 if metric in {"itl", "tpot"} else 1
            lines.append(
                [
                    str(row["provider"]),
                    str(row["stage"]),
                    str(row["region"]),
                    title,
                    str(row[f"{metric}_n"]),
                    *(
                        percentile(row, f"{metric}_{label}_ms", digits)
                        for label in PERCENTILE_LABELS
                    ),
                    number(row.get(f"{metric}_mean_ms"), digits),
                    number(row.get(f"{metric}_std_ms"), digits),
                    *(_interval(row, metric, label, digits) for label in ("p50", "p99")),
                ]
            )
    return lines


PERCENTILE_HEADER = (
    "provider", "stage", "region", "metric", "n",
    *(PERCENTILE_TITLES[label] for label in PERCENTILE_LABELS),
    "mean", "std", "p50 95% CI", "p99 95% CI",
)  # fmt: skip
# Of the percentile table's columns, the first are text (row keys, metric).
PERCENTILE_KEYS = 4

CAPTION = (
    "latencies in ms, send-based unless 'from intent'; percentiles, means, standard "
    "deviations (population, as numpy's np.std), req/s, tok/s and goodput over successful "
    "requests only; rates in each shard's steady-state window"
)
