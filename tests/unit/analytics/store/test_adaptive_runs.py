"""The stored state of decided and early-ended stages, and the query the decisions read
(``stage_monitor.sql``), on a real DuckDB file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analytics.decide.early_stop import interval_ranks
from analytics.store.adaptive_runs import (
    CapacityRow,
    OutcomeRow,
    RoleRow,
    VerdictRow,
    capacity_rows,
    measured_rates,
    outcome_rows,
    role_rows,
    stage_figures,
    verdict_rows,
    write_capacity,
    write_outcome,
    write_roles,
    write_verdict,
)
from analytics.store.db import connect
from scenarios.load.adaptive import StopWhen
from scenarios.slo import SLO
from tests.support.analytics_builders import failed_result, ok_result, scenario, store_run
from tests.support.builders import MS, S
from workers.client.errors import ErrorClass


def test_rows_round_trip_and_the_first_early_end_stands(tmp_path: Path) -> None:
    con = connect(tmp_path / "a.duckdb")
    write_roles(con, "r", [RoleRow(2, "p", "probe", "open", 7.5, "bisect 5–10 req/s")])
    write_roles(con, "r", [])  # nothing to write is fine
    assert role_rows(con, "r") == [RoleRow(2, "p", "probe", "open", 7.5, "bisect 5–10 req/s")]
    first = OutcomeRow(2, "p", "saturated", True, "why", {"signals": ["x"]}, 100, 40, 6.5)
    write_outcome(con, "r", first)
    write_outcome(con, "r", OutcomeRow(2, "p", "stopped_early", True, "later", {}, 100, 60, 9))
    assert outcome_rows(con, "r") == [first]
    verdict = VerdictRow(2, "p", "pass", 0.97, 0.93, 0.99, 100, 97, 7.4, {"local": {"n": 100}})
    write_verdict(con, "r", verdict)
    write_verdict(con, "r", verdict)  # judged again after a restart: the same row
    assert verdict_rows(con, "r") == [verdict]
    search = CapacityRow("p", "rate", "searching", 5.0, None, 1, None, 3, "bisect")
    write_capacity(con, "r", search)
    done = CapacityRow("p", "rate", "converged", 7.5, 7.8, 2, 3, 4, "holds 7.5")
    write_capacity(con, "r", done)
    assert capacity_rows(con, "r") == [done]


def test_stage_figures_count_the_slo_and_bound_the_percentile_by_order_statistics(
    tmp_path: Path,
) -> None:
    con = connect(tmp_path / "f.duckdb")
    rng = np.random.default_rng(5)
    ttfts = list(rng.uniform(20, 200, 600))
    results = [ok_result(10 * S + i * 20 * MS, t, [5.0] * 4) for i, t in enumerate(ttfts)]
    results += [failed_result(30 * S, ErrorClass.TIMEOUT)]
    store_run(con, "run", scenario([{"name": "a", "kind": "simulated"}]), {("a", 0, "eu"): results})
    rule = StopWhen(metric="ttft", quantile=0.9, rel_ci=0.05)
    (row,) = stage_figures(con, "run", 0, [("s0.a.eu", 1)], 0.0, SLO(ttft_ms=100), rule)
    assert (row.provider, row.region, row.requests, row.ok) == ("a", "eu", 601, 600)
    # The builder schedules each request 1 ms before it is sent (closed loop: from sent).
    assert row.met == sum(1 for t in ttfts if t <= 100)
    ordered = sorted(round(t * MS) / MS for t in ttfts)
    ranks = interval_ranks(600, 0.9, 0.95)
    assert ranks is not None and row.n == 600
    assert row.low == pytest.approx(ordered[ranks[0] - 1], abs=1e-6)
    assert row.high == pytest.approx(ordered[ranks[1] - 1], abs=1e-6)
    assert row.estimate == pytest.approx(float(np.quantile(ordered, 0.9)), abs=1e-6)
    # TTFT from intent by quarter of the intended starts: uniform noise, four medians.
    assert len(row.ttft_quarters_ms) == 4 and all(80 < q < 140 for q in row.ttft_quarters_ms)
    # Other attempts are not read; an empty list reads nothing.
    assert stage_figures(con, "run", 0, [("s0.a.eu", 2)], 0.0, None, None) == []
    assert stage_figures(con, "run", 0, [], 0.0, None, None) == []


def test_the_warm_up_is_left_out_of_the_counts(tmp_path: Path) -> None:
    con = connect(tmp_path / "w.duckdb")
    results = [ok_result(10 * S + i * S, 50.0, [5.0]) for i in range(20)]
    store_run(con, "run", scenario([{"name": "a", "kind": "simulated"}]), {("a", 0, "eu"): results})
    (row,) = stage_figures(con, "run", 0, [("s0.a.eu", 1)], 5.0, None, None)
    assert row.requests == 15  # intended starts 0..19 s: the first five are warm-up


def test_measured_rates_are_the_reports_request_rate(tmp_path: Path) -> None:
    con = connect(tmp_path / "m.duckdb")
    results = [ok_result(10 * S + i * 250 * MS, 50.0, [5.0]) for i in range(41)]
    store_run(con, "run", scenario([{"name": "a", "kind": "simulated"}]), {("a", 0, "eu"): results})
    rate = con.execute("SELECT request_rate FROM stage_summary").fetchone()
    assert rate is not None and measured_rates(con, "run", 0) == {"a": pytest.approx(rate[0])}
    assert measured_rates(con, "run", 1) == {}
