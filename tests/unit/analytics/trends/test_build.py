"""analytics/trends/build.py on real DuckDB files: runs stored along the control plane's path, the
trend's figures are the report's own (intervals included), a slowed latest run is flagged,
what cannot be judged says why, and runs are selected by schedule, scenario or name."""

from __future__ import annotations

import random
from pathlib import Path

import duckdb
import pytest

from analytics.report.build import build_report
from analytics.store.db import connect
from analytics.store.runs import RunStore
from analytics.trends.build import METRICS, TrendOptions, TrendSelection, build_trend, created
from scenarios.errors import BadInput, NotFound
from tests.support.analytics_builders import MS, failed_result, ok_result, scenario, store_run
from workers.client.errors import ErrorClass

SPEC = scenario([{"name": "api", "kind": "simulated"}])


def _run(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    ttft_ms: float,
    *,
    n: int = 60,
    failed: int = 0,
    schedule: str | None = "sch-1",
    state: str = "finished",
    seed: int = 0,
) -> None:
    rng = random.Random(seed)
    results = [
        ok_result(i * 20 * MS, ttft_ms * (1 + 0.02 * rng.random()), [5.0] * 10) for i in range(n)
    ]
    results += [failed_result((n + i) * 20 * MS, ErrorClass.HTTP_5XX) for i in range(failed)]
    store_run(con, run_id, SPEC, {("api", 0, "local"): results})
    RunStore(con).finish_run(run_id, state)
    con.execute("INSERT INTO run_origins VALUES (?, ?, ?)", [run_id, "sc-1", schedule])


@pytest.fixture
def con(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    return connect(tmp_path / "trend.duckdb")


def _row(report: object, metric: str) -> dict[str, object]:
    return next(r for r in report.rows if r["metric"] == metric)  # type: ignore[attr-defined]


def test_a_slowed_latest_run_is_a_regression(con: duckdb.DuckDBPyConnection) -> None:
    for index in range(4):
        _run(con, f"r{index}", 20.0, seed=index)
    _run(con, "r4", 60.0, seed=9)
    report = build_trend(con, TrendSelection(schedule_id="sch-1"))
    assert [r["run_id"] for r in report.runs] == ["r0", "r1", "r2", "r3", "r4"]
    p50 = _row(report, "ttft_p50_ms")
    assert p50["regression"] is True and p50["latest_run_id"] == "r4"
    assert p50["window_runs"] == 4
    assert p50["latest"] > p50["band_high"] > p50["window_mean"]
    assert str(p50["verdict"]).startswith("regression: TTFT p50 rose to")
    assert [r["metric"] for r in report.regressions] == ["ttft_p50_ms"]
    # Every figure is followed for every run.
    assert {p["metric"] for p in report.points} == {m.key for m in METRICS}
    assert len([p for p in report.points if p["metric"] == "ttft_p50_ms"]) == 5


def test_a_stable_latest_run_is_not(con: duckdb.DuckDBPyConnection) -> None:
    for index in range(5):
        _run(con, f"r{index}", 20.0, seed=index)
    report = build_trend(con, TrendSelection(schedule_id="sch-1"))
    assert report.regressions == []
    p50 = _row(report, "ttft_p50_ms")
    assert p50["judged"] is True and str(p50["verdict"]).startswith("no change")


def test_figures_and_intervals_are_the_reports(con: duckdb.DuckDBPyConnection) -> None:
    _run(con, "r0", 20.0, seed=1)
    _run(con, "r1", 22.0, seed=2)
    row = build_report(con, "r1").stages[0]
    p50 = _row(build_trend(con, TrendSelection(schedule_id="sch-1")), "ttft_p50_ms")
    assert p50["latest"] == pytest.approx(row["ttft_p50_ms"])
    assert p50["latest_ci_low"] == pytest.approx(row["ttft_p50_ci_low_ms"])
    assert p50["latest_ci_high"] == pytest.approx(row["ttft_p50_ci_high_ms"])
    throughput = _row(build_trend(con, TrendSelection(name=SPEC.name)), "output_tok_s")
    assert throughput["latest"] == pytest.approx(row["output_tok_s"])


def test_what_cannot_be_judged_says_why(con: duckdb.DuckDBPyConnection) -> None:
    _run(con, "r0", 20.0)
    _run(con, "r1", 20.0, seed=3)
    report = build_trend(con, TrendSelection(schedule_id="sch-1"))
    p99 = _row(report, "ttft_p99_ms")  # 60 requests cannot support a p99
    assert p99["judged"] is False and p99["latest_low_sample"] is True
    assert "too few samples" in str(p99["verdict"])
    tok = _row(report, "output_tok_s")  # one earlier run, no within-run interval
    assert tok["judged"] is False and "one earlier run" in str(tok["verdict"])
    cost = _row(report, "cost_per_mtok_output")  # no pricing
    assert cost["latest"] is None and "did not measure" in str(cost["verdict"])


def test_an_outage_is_an_error_rate_regression(con: duckdb.DuckDBPyConnection) -> None:
    for index in range(3):
        _run(con, f"r{index}", 20.0, seed=index)
    _run(con, "r3", 20.0, n=30, failed=30, state="failed")  # failed runs count too
    report = build_trend(con, TrendSelection(schedule_id="sch-1"))
    errors = _row(report, "error_rate")
    assert errors["regression"] is True and errors["latest"] == pytest.approx(0.5)
    assert errors["change_text"] == "+50.0 pp"


def test_runs_are_selected_by_schedule_scenario_or_name(con: duckdb.DuckDBPyConnection) -> None:
    _run(con, "a0", 20.0, schedule="sch-a")
    _run(con, "b0", 20.0, schedule="sch-b")
    _run(con, "a1", 20.0, schedule="sch-a")
    _run(con, "a2", 20.0, schedule="sch-a", state="cancelled")  # not a measurement
    _run(con, "a3", 20.0, schedule="sch-a", state="running")
    ids = lambda report: [r["run_id"] for r in report.runs]  # noqa: E731
    assert ids(build_trend(con, TrendSelection(schedule_id="sch-a"))) == ["a0", "a1"]
    assert ids(build_trend(con, TrendSelection(scenario_id="sc-1"))) == ["a0", "b0", "a1"]
    assert ids(build_trend(con, TrendSelection(name=SPEC.name))) == ["a0", "b0", "a1"]
    newest = build_trend(con, TrendSelection(name=SPEC.name), TrendOptions(runs=2))
    assert ids(newest) == ["b0", "a1"]
    as_of = build_trend(con, TrendSelection(name=SPEC.name), TrendOptions(as_of="b0"))
    assert ids(as_of) == ["a0", "b0"] and {r["latest_run_id"] for r in as_of.rows} == {"b0"}
    with pytest.raises(NotFound):
        build_trend(con, TrendSelection(name=SPEC.name), TrendOptions(as_of="nope"))
    empty = build_trend(con, TrendSelection(schedule_id="sch-none"))
    assert empty.runs == [] and empty.rows == []
    with pytest.raises(BadInput):
        TrendSelection(schedule_id="x", name="y")
    assert created(
        report_time := build_trend(con, TrendSelection(schedule_id="sch-a")).runs[0]["created_at"]
    )
    assert len(created(report_time)) == 16
