"""The trend report: a provider's figures across the runs of a schedule (or a scenario).

For each provider × region × stage of the selected runs it follows five figures, each the
report's own (``stage_summary``): TTFT p50 and p99, output tok/s, error rate and $ per 1M
output tokens. The latest run is judged against the runs before it
(``analytics.trends.regression``): each TTFT percentile carries its run's bootstrap interval
(computed for the runs the verdict reads: the latest and its window), each error rate
its binomial error. A TTFT percentile its run's sample cannot support (the report's
low-sample rule, ``*``) is shown but not judged, and left out of the window.

Runs are selected by schedule, by stored scenario (``run_origins``) or by scenario name
(local ``tokenbench run`` runs have no stored scenario), ended ones only (finished or
failed), the newest ``runs`` of them, at or before ``as_of`` when given: what the
scheduler uses to judge the run that just ended. Field meanings: docs/tracking.md.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import duckdb

from analytics.report.stored import (
    ExactLimits,
    group_histograms,
    stored_summary_rows,
    use_histograms,
)
from analytics.sql.files import load_sql
from analytics.stats.confidence import CI_METRICS, bootstrap_rows, flag_low_samples
from analytics.stats.percentiles import CI_QUANTILES
from analytics.trends.regression import (
    CONFIDENCE,
    DEFAULT_MIN_CHANGE,
    DEFAULT_WINDOW,
    ERROR_RATE_FLOOR,
    Judgement,
    Point,
    judge,
    rate_se,
    se_from_interval,
)
from scenarios.errors import BadInput, NotFound

DEFAULT_TREND_RUNS = 30


@dataclass(frozen=True, slots=True)
class TrendMetric:
    """A figure the trend follows: its summary column, how it is named and written, and
    which way is worse."""

    key: str
    title: str
    unit: str
    higher_is_worse: bool
    short: str  # in narrow tables
    absolute_floor: float = 0.0

    def text(self, value: float | None) -> str:
        """The value as the text formats write it."""
        if value is None:
            return "–"
        if self.key == "error_rate":
            return f"{100 * value:.1f} %"
        if self.key == "cost_per_mtok_output":
            return f"${value:,.2f}" if abs(value) >= 1 else f"${value:,.4f}"
        return f"{value:,.0f}" if self.key == "output_tok_s" else f"{value:,.1f}"

    def change_text(self, judgement: Judgement) -> str:
        """``+12 %`` (relative), ``+2.5 pp`` for an error rate."""
        if judgement.change is None:
            return "–"
        if self.key == "error_rate":
            points = round(100 * judgement.change, 1)
            return "±0 pp" if points == 0 else f"{points:+.1f} pp"
        if judgement.relative_change is None:
            return "–"
        percent = round(100 * judgement.relative_change)
        return "±0 %" if percent == 0 else f"{percent:+d} %"


METRICS: tuple[TrendMetric, ...] = (
    TrendMetric("ttft_p50_ms", "TTFT p50", "ms", higher_is_worse=True, short="TTFT p50"),
    TrendMetric("ttft_p99_ms", "TTFT p99", "ms", higher_is_worse=True, short="TTFT p99"),
    TrendMetric("output_tok_s", "output tok/s", "tok/s", higher_is_worse=False, short="out tok/s"),
    TrendMetric(
        "error_rate",
        "error rate",
        "",
        higher_is_worse=True,
        short="errors",
        absolute_floor=ERROR_RATE_FLOOR,
    ),
    TrendMetric(
        "cost_per_mtok_output", "$/1M output", "USD", higher_is_worse=True, short="$/1M out"
    ),
)
METRIC_BY_KEY = {m.key: m for m in METRICS}
_PERCENTILES = ("ttft_p50_ms", "ttft_p99_ms")


@dataclass(frozen=True, slots=True)
class TrendSelection:
    """Which runs a trend follows: exactly one of a schedule, a stored scenario, a name,
    or a provider (``provider``, optionally narrowed to a ``model``): every run that
    measured it, imported runs of other tools included (docs/import.md)."""

    schedule_id: str | None = None
    scenario_id: str | None = None
    name: str | None = None
    provider: str | None = None
    model: str | None = None

    def __post_init__(self) -> None:
        chosen = (self.schedule_id, self.scenario_id, self.name, self.provider)
        given = [v for v in chosen if v is not None]
        if len(given) != 1:
            raise BadInput("give exactly one of schedule_id, scenario_id, name and provider")
        if self.model is not None and self.provider is None:
            raise BadInput("model narrows a provider's trend: give provider too")

    def describe(self) -> str:
        """``schedule sch-…``, ``scenario sc-…``, ``runs named …`` or ``provider …``."""
        if self.schedule_id is not None:
            return f"schedule {self.schedule_id}"
        if self.scenario_id is not None:
            return f"scenario {self.scenario_id}"
        if self.provider is not None:
            model = f" (model {self.model})" if self.model else ""
            return f"provider {self.provider!r}{model}"
        return f"runs named {self.name!r}"


@dataclass(frozen=True, slots=True)
class TrendOptions:
    """How many runs to read, how many the verdict compares with, what change counts."""

    runs: int = DEFAULT_TREND_RUNS
    window: int = DEFAULT_WINDOW
    min_change: float = DEFAULT_MIN_CHANGE
    as_of: str | None = None  # judge this run as the latest (later runs are left out)
    # The runs the reader may see: a trusted SQL condition on ``r.run_id`` with named
    # parameters (the API's read rule, docs/teams.md), applied in the query.
    visible: tuple[str, dict[str, object]] = ("TRUE", {})


@dataclass(frozen=True)
class TrendReport:
    """The selected runs, each series' points, and the verdict on each latest value."""

    title: str
    selection: dict[str, Any]
    options: dict[str, Any]
    runs: list[dict[str, Any]]  # oldest first
    rows: list[dict[str, Any]]  # one per provider × region × stage × metric
    points: list[dict[str, Any]] = field(default_factory=list)  # one per run × row

    @property
    def regressions(self) -> list[dict[str, Any]]:
        """The rows whose latest value is a regression."""
        return [row for row in self.rows if row["regression"]]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "title": self.title,
            "selection": self.selection,
            "options": self.options,
            "confidence": CONFIDENCE,
            "runs": self.runs,
            "rows": self.rows,
            "regressions": self.regressions,
            "points": self.points,
        }


def _rows(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    columns = [d[0] for d in cursor.description or []]
    return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def select_runs(
    con: duckdb.DuckDBPyConnection, selection: TrendSelection, options: TrendOptions
) -> list[dict[str, Any]]:
    """The selected ended runs, oldest first (NotFound when ``as_of`` is no run)."""
    visible, visible_params = options.visible
    if (
        options.as_of is not None
        and not con.execute(
            f"SELECT 1 FROM runs AS r WHERE r.run_id = $as_of AND {visible}",  # noqa: S608
            {"as_of": options.as_of, **visible_params},
        ).fetchall()
    ):
        raise NotFound(f"no run {options.as_of!r}")
    params = {
        "schedule_id": selection.schedule_id,
        "scenario_id": selection.scenario_id,
        "name": selection.name,
        "provider": selection.provider,
        "model": selection.model,
        "as_of": options.as_of,
        "runs": options.runs,
        **visible_params,
    }
    query = load_sql("trend_runs").replace("{visible}", visible)
    return list(reversed(_rows(con.execute(query, params))))


def _with_ci_inputs(row: dict[str, Any]) -> dict[str, Any]:
    """A summary row as ``bootstrap_rows`` reads it: TTFT percentiles only."""
    for metric in CI_METRICS:
        for label, _ in CI_QUANTILES:
            row.setdefault(f"{metric}_{label}_ms", None)
        row.setdefault(f"{metric}_n", 0)
    return row


def _summaries(
    con: duckdb.DuckDBPyConnection, run_ids: list[str], ci_runs: set[str]
) -> list[dict[str, Any]]:
    """Every run's summary rows; TTFT intervals for ``ci_runs``. Runs the report would
    read from stored aggregates (too large for exact percentiles) are read the same way."""
    limits = ExactLimits()
    stored = [r for r in run_ids if use_histograms(con, r, limits)]
    exact = [r for r in run_ids if r not in stored]
    rows = [
        _with_ci_inputs(row)
        for row in _rows(con.execute(load_sql("trend_summary"), {"run_ids": exact}))
    ]
    by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_run[row["run_id"]].append(row)
    for run_id in stored:
        histograms = group_histograms(con, run_id)
        summary = stored_summary_rows(con, run_id, histograms)
        by_run[run_id] = [_with_ci_inputs(_trend_columns(row)) for row in summary]
        if run_id in ci_runs:
            bootstrap_rows(con, run_id, by_run[run_id], histograms)
    for run_id in exact:
        if run_id in ci_runs and by_run.get(run_id):
            bootstrap_rows(con, run_id, by_run[run_id])
    out = []
    for run_id in run_ids:
        for row in by_run.get(run_id, []):
            row["low_sample"] = flag_low_samples(row)
            out.append(row)
    return out


_TREND_COLUMNS = (
    "run_id", "stage", "provider", "region", "concurrency", "requests", "errors", "error_rate",
    "ttft_n", "ttft_p50_ms", "ttft_p99_ms", "output_tok_s", "cost_per_mtok_output",
)  # fmt: skip


def _trend_columns(row: dict[str, Any]) -> dict[str, Any]:
    return {key: row.get(key) for key in _TREND_COLUMNS}


def _point(metric: TrendMetric, row: dict[str, Any]) -> tuple[Point | None, dict[str, Any]]:
    """The judged value of ``row`` (None when missing or low-sample) and its record."""
    value = row.get(metric.key)
    stem = metric.key.removesuffix("_ms")
    low = row.get(f"{stem}_ci_low_ms") if metric.key in _PERCENTILES else None
    high = row.get(f"{stem}_ci_high_ms") if metric.key in _PERCENTILES else None
    low_sample = metric.key in row["low_sample"]
    record = {
        "run_id": row["run_id"],
        "value": None if value is None else float(value),
        "ci_low": low,
        "ci_high": high,
        "low_sample": low_sample,
    }
    if value is None or low_sample:
        return None, record
    if metric.key in _PERCENTILES:
        se = se_from_interval(low, high)
    elif metric.key == "error_rate":
        se = rate_se(int(row["errors"] or 0), int(row["requests"] or 0))
    else:
        se = None
    return Point(float(value), se), record


def _clamp(metric: TrendMetric, value: float | None) -> float | None:
    if value is None:
        return None
    value = max(0.0, value)
    return min(1.0, value) if metric.key == "error_rate" else value


def _verdict(metric: TrendMetric, latest: float | None, j: Judgement, min_change: float) -> str:
    """One plain sentence on the latest value."""
    if not j.judged:
        return f"not judged: {j.reason}"
    unit = f" {metric.unit}" if metric.unit in {"ms", "tok/s"} else ""
    band = (
        f"{metric.text(_clamp(metric, j.band_low))}–{metric.text(_clamp(metric, j.band_high))}"
        f"{unit}"
    )
    now = f"{metric.text(latest)}{unit}"
    runs = f"{j.window_runs} earlier run{'s' if j.window_runs != 1 else ''}"
    if j.regression:
        direction = "fell" if not metric.higher_is_worse else "rose"
        return (
            f"regression: {metric.title} {direction} to {now} from a mean of "
            f"{metric.text(j.window_mean)}{unit} over {runs} ({metric.change_text(j)}), "
            f"outside the 95 % band {band}"
        )
    assert latest is not None
    assert j.band_low is not None
    assert j.band_high is not None
    if j.band_low <= latest <= j.band_high:
        return f"no change: {now} is inside the 95 % band {band} of {runs}"
    worse = (latest > j.band_high) == metric.higher_is_worse
    if not worse:
        return f"better: {now}, outside the 95 % band {band} of {runs}"
    return (
        f"slightly worse: {now} is outside the 95 % band {band} of {runs}, but by less "
        f"than the {100 * min_change:.0f} % that counts"
        + (" (or 1 pp)" if metric.key == "error_rate" else "")
    )


def _series_rows(
    key: tuple[str, str, int],
    rows_by_run: dict[str, dict[str, Any]],
    runs: list[dict[str, Any]],
    options: TrendOptions,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    provider, region, stage = key
    latest_run = runs[-1]["run_id"]
    created = {r["run_id"]: r["created_at"] for r in runs}
    out, points = [], []
    present = [rows_by_run[r["run_id"]] for r in runs if r["run_id"] in rows_by_run]
    concurrency = present[-1].get("concurrency") if present else None
    for metric in METRICS:
        judged: list[tuple[str, Point]] = []
        for row in present:
            point, record = _point(metric, row)
            points.append(
                {
                    "created_at": created[row["run_id"]],
                    "provider": provider,
                    "region": region,
                    "stage": stage,
                    "metric": metric.key,
                    **record,
                }
            )
            if point is not None:
                judged.append((row["run_id"], point))
        last_row = rows_by_run.get(latest_run)
        latest_value = None if last_row is None else last_row.get(metric.key)
        if judged and judged[-1][0] == latest_run:
            window = [p for _, p in judged[:-1]][-options.window :]
            judgement = judge(
                judged[-1][1],
                window,
                higher_is_worse=metric.higher_is_worse,
                min_change=options.min_change,
                absolute_floor=metric.absolute_floor,
            )
        else:
            reason = (
                "the latest run did not measure it"
                if latest_value is None
                else "too few samples in the latest run (the report marks it *)"
            )
            judgement = Judgement(False, False, 0, reason=reason)
        latest_record: dict[str, Any] | None = next(
            (
                p
                for p in reversed(points)
                if p["metric"] == metric.key and p["run_id"] == latest_run
            ),
            None,
        )
        out.append(
            {
                "provider": provider,
                "region": region,
                "stage": stage,
                "concurrency": concurrency,
                "metric": metric.key,
                "title": metric.title,
                "unit": metric.unit,
                "runs": sum(1 for p in points if p["metric"] == metric.key),
                "latest_run_id": latest_run,
                "latest": None if latest_value is None else float(latest_value),
                "latest_ci_low": latest_record["ci_low"] if latest_record else None,
                "latest_ci_high": latest_record["ci_high"] if latest_record else None,
                "latest_low_sample": bool(latest_record and latest_record["low_sample"]),
                "judged": judgement.judged,
                "regression": judgement.regression,
                "window_runs": judgement.window_runs,
                "window_mean": judgement.window_mean,
                # Every figure is ≥ 0 and a rate ≤ 1: the band is shown within that.
                "band_low": _clamp(metric, judgement.band_low),
                "band_high": _clamp(metric, judgement.band_high),
                "change": judgement.change,
                "relative_change": judgement.relative_change,
                "change_text": metric.change_text(judgement),
                "verdict": _verdict(
                    metric,
                    None if latest_value is None else float(latest_value),
                    judgement,
                    options.min_change,
                ),
            }
        )
    return out, points


def build_trend(
    con: duckdb.DuckDBPyConnection,
    selection: TrendSelection,
    options: TrendOptions | None = None,
) -> TrendReport:
    """The trend report of the selected runs (an empty one when none has ended)."""
    options = options or TrendOptions()
    runs = select_runs(con, selection, options)
    title = f"trend of {selection.describe()}"
    if runs:
        title += f" · {runs[-1]['name']} · {len(runs)} run{'s' if len(runs) != 1 else ''}"
    report_options = {
        "runs": options.runs,
        "window": options.window,
        "min_change": options.min_change,
        "as_of": options.as_of,
    }
    selected = {
        "schedule_id": selection.schedule_id,
        "scenario_id": selection.scenario_id,
        "name": selection.name,
        "provider": selection.provider,
        "model": selection.model,
    }
    if not runs:
        return TrendReport(title, selected, report_options, [], [], [])
    run_ids = [r["run_id"] for r in runs]
    summaries = _summaries(con, run_ids, set(run_ids[-(options.window + 1) :]))
    if selection.provider is not None:
        summaries = _one_provider(summaries, selection.provider)
    by_series: dict[tuple[str, str, int], dict[str, dict[str, Any]]] = defaultdict(dict)
    for row in summaries:
        by_series[(row["provider"], row["region"], int(row["stage"]))][row["run_id"]] = row
    rows: list[dict[str, Any]] = []
    points: list[dict[str, Any]] = []
    for key in sorted(by_series):
        series_rows, series_points = _series_rows(key, by_series[key], runs, options)
        rows += series_rows
        points += series_points
    public_runs = [
        {
            "run_id": r["run_id"],
            "name": r["name"],
            "state": r["state"],
            "created_at": r["created_at"],
            # tokenbench, or the tool of an imported run (docs/import.md)
            "tool": r["tool"],
        }
        for r in runs
    ]
    return TrendReport(title, selected, report_options, public_runs, rows, points)


def _one_provider(rows: list[dict[str, Any]], provider: str) -> list[dict[str, Any]]:
    """A provider's rows; when every run measured it from one region, the regions are
    one series (``any``): tokenbench's region and an imported run's are then the same
    history, stage by stage."""
    rows = [row for row in rows if row["provider"] == provider]
    regions: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        regions[row["run_id"]].add(row["region"])
    if all(len(names) == 1 for names in regions.values()):
        rows = [{**row, "region": "any"} for row in rows]
    return rows


def created(value: Any) -> str:
    """A run's creation time as the text formats write it (UTC, to the minute)."""
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M")
    return str(value)[:16].replace("T", " ")
