"""The report's answers from stored runs: the capacity sentence, the sweep's knee, the
stages ended early, and the marks every stage row carries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from analytics.report.answers import slo_text
from analytics.report.build import build_report
from analytics.store.adaptive_runs import (
    CapacityRow,
    OutcomeRow,
    RoleRow,
    VerdictRow,
    write_capacity,
    write_outcome,
    write_roles,
    write_verdict,
)
from analytics.store.db import connect
from scenarios.model import Scenario
from scenarios.slo import SLO
from tests.support.analytics_builders import ok_result, store_run
from tests.support.builders import S


def adaptive_scenario(load: dict[str, Any]) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "answers",
            "providers": [
                {"name": "gpu", "kind": "simulated", "deployment": {"hardware": "h100", "gpus": 1}}
            ],
            "regions": ["eu"],
            "workload": {
                "mix": [
                    {
                        "prompt_tokens": {"dist": "fixed", "value": 50},
                        "output_tokens": {"dist": "fixed", "value": 100},
                    }
                ]
            },
            "load": load,
        }
    )


def paced(n: int, per_s: float, ttft_ms: float) -> list[Any]:
    return [ok_result(10 * S + round(i * S / per_s), ttft_ms, [5.0] * 9) for i in range(n)]


@pytest.fixture
def capacity_run(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    con = connect(tmp_path / "c.duckdb")
    spec = adaptive_scenario(
        {"find_capacity": {"slo": {"ttft_ms": 500}, "attainment": 0.99}, "requests_per_level": 500}
    )
    stages = {("gpu", k, "eu"): paced(50, rate, 80.0) for k, rate in enumerate((2, 20, 6, 9))}
    store_run(con, "run", spec, stages)
    write_roles(
        con,
        "run",
        [
            RoleRow(0, "gpu", "synchronous", "closed", 1),
            RoleRow(1, "gpu", "throughput", "closed", 256),
            RoleRow(2, "gpu", "probe", "open", 6.0),
            RoleRow(3, "gpu", "probe", "open", 9.0),
        ],
    )
    regions = {"eu": {"attainment": 0.996, "low": 0.991, "verdict": "pass"}}
    write_verdict(con, "run", VerdictRow(2, "gpu", "pass", 0.996, 0.991, 1, 50, 50, 6, regions))
    write_verdict(con, "run", VerdictRow(3, "gpu", "fail", 0.5, 0.3, 0.6, 50, 25, 9, {}))
    write_capacity(
        con, "run", CapacityRow("gpu", "rate", "converged", 6.0, 9.0, 2, 3, 4, "holds 6")
    )
    write_outcome(
        con, "run", OutcomeRow(3, "gpu", "saturated", True, "queue grew", {"a": 1}, 200, 40, 4.0)
    )
    return con


def test_the_capacity_answer_names_the_load_the_slo_the_interval_and_the_cost(
    capacity_run: duckdb.DuckDBPyConnection,
) -> None:
    report = build_report(capacity_run, "run")
    (answer,) = report.answers["capacity"]
    assert (answer["provider"], answer["region"], answer["state"]) == ("gpu", "eu", "converged")
    assert (answer["low"], answer["high"], answer["capacity"], answer["half_width"]) == (
        6.0, 9.0, 7.5, 1.5,
    )  # fmt: skip
    row = next(r for r in report.stages if r["stage"] == 2)
    assert answer["cost_per_mtok_output"] == row["cost_per_mtok_output"] is not None
    sentence = answer["answer"]
    assert sentence.startswith("gpu · eu: holds 7.5 req/s ± 1.5 at p99 TTFT ≤ 500 ms")
    assert "6 held: 99.6 % met, ≥ 99.1 % with 95 % confidence; 9 did not" in sentence
    assert "per 1M output tokens there" in sentence


def test_stage_rows_carry_their_role_outcome_and_offered_rate(
    capacity_run: duckdb.DuckDBPyConnection,
) -> None:
    report = build_report(capacity_run, "run")
    marks = {r["stage"]: (r["stage_role"], r["stage_outcome"]) for r in report.stages}
    assert marks == {
        0: ("synchronous", None),
        1: ("throughput", None),
        2: ("probe", None),
        3: ("probe", "saturated"),
    }
    assert all(r["offered_rps"] is None for r in report.stages)  # stored closed-loop specs
    (ended,) = report.answers["ended"]
    assert (ended["requests_recorded"], ended["requests_saved"]) == (50, 150)
    assert report.answers["requests_saved"] == 150 and report.answers["notes"]


@pytest.mark.parametrize(
    ("state", "low", "high", "fragment"),
    [
        ("unattainable", None, None, "does not hold p99 TTFT ≤ 500 ms at any load probed"),
        ("at_max", 12.0, None, "holds at least 12 req/s"),
        ("max_stages", 6.0, 9.0, "[holds 6]"),
        ("searching", None, None, "no load shown to hold"),
    ],
)
def test_every_search_state_reads_as_a_sentence(
    capacity_run: duckdb.DuckDBPyConnection,
    state: str,
    low: float | None,
    high: float | None,
    fragment: str,
) -> None:
    row = CapacityRow("gpu", "rate", state, low, high, 2 if low else None, None, 4, "holds 6")
    write_capacity(capacity_run, "run", row)
    (answer,) = build_report(capacity_run, "run").answers["capacity"]
    assert fragment in answer["answer"], answer["answer"]


def test_a_sweep_reports_its_curve_and_knee(tmp_path: Path) -> None:
    con = connect(tmp_path / "s.duckdb")
    spec = adaptive_scenario({"sweep": {"points": 2}, "requests_per_level": 40})
    stages = {
        ("gpu", 0, "eu"): paced(40, 2, 40.0),
        ("gpu", 1, "eu"): paced(40, 20, 900.0),
        ("gpu", 2, "eu"): paced(40, 8, 60.0),
        ("gpu", 3, "eu"): paced(40, 14, 200.0),
    }
    store_run(con, "run", spec, stages)
    write_roles(
        con,
        "run",
        [
            RoleRow(0, "gpu", "synchronous", "closed", 1),
            RoleRow(1, "gpu", "throughput", "closed", 256),
            RoleRow(2, "gpu", "sweep", "open", 8.0),
            RoleRow(3, "gpu", "sweep", "open", 14.0),
        ],
    )
    (sweep,) = build_report(con, "run").answers["sweep"]
    assert [p["role"] for p in sweep["points"]] == ["synchronous", "throughput", "sweep", "sweep"]
    assert sweep["knee"]["stage"] == 2  # 60 ms ≤ 2 × 40; 200 ms is not
    assert sweep["synchronous_rps"] < sweep["throughput_rps"]
    assert (
        sweep["answer"].startswith("gpu · eu: knee at ") and "(stage 2, sweep)" in sweep["answer"]
    )


def test_a_fixed_run_has_empty_answers(tmp_path: Path) -> None:
    con = connect(tmp_path / "f.duckdb")
    spec = adaptive_scenario({"concurrency": [1], "requests_per_level": 10})
    store_run(con, "run", spec, {("gpu", 0, "eu"): paced(10, 2, 40.0)})
    report = build_report(con, "run")
    assert report.answers == {
        "capacity": [], "sweep": [], "ended": [], "requests_saved": None, "notes": None,
    }  # fmt: skip
    assert report.to_dict()["answers"] == report.answers
    (row,) = report.stages
    assert (row["stage_role"], row["stage_outcome"]) == (None, None)


def test_slo_text_reads_as_a_percentile_or_a_share() -> None:
    assert slo_text(SLO(ttft_ms=500), 0.99) == "p99 TTFT ≤ 500 ms"
    assert (
        slo_text(SLO(ttft_ms=500, tpot_ms=50), 0.9) == "90 % within TTFT ≤ 500 ms and TPOT ≤ 50 ms"
    )
