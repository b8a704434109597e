"""analytics/report/spend.py: the run's spend from its records × price, its stored bound
beside it, and none for a run without a priced provider."""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics.report.spend import run_spend
from analytics.store.db import connect
from api.control.cost_plan import cost_plan
from api.control.spend import record_bound, update_ledger
from scenarios.model import Scenario
from tests.support.builders import REPORT_SCENARIO, ok_result, store_run


def test_spend_per_priced_provider_with_its_bound(tmp_path: Path) -> None:
    con = connect(tmp_path / "r.duckdb")
    results = [ok_result(i * 10**9, 10.0, [1.0] * 99) for i in range(2)]
    store_run(con, "r1", REPORT_SCENARIO, {("api", 0): results, ("own", 0): results})
    scenario = Scenario.model_validate(
        {**REPORT_SCENARIO, "load": {"concurrency": [1], "requests_per_level": 2}}
    )
    plan = cost_plan(scenario)
    record_bound(con, "r1", "t", plan)
    spent = run_spend(con, "r1")
    assert spent is not None
    (row,) = spent["rows"]
    assert (row["provider"], row["input_tokens"], row["output_tokens"]) == ("api", 100, 200)
    assert row["usd"] == pytest.approx((100 * 0.8 + 200 * 1.2) / 1e6)
    assert row["usd"] == pytest.approx(update_ledger(con, "r1", "t"))  # the ledger's rule
    assert row["bound_usd"] == plan.cost_bound_usd and row["bound_usd"] >= row["usd"]
    assert spent["stop_reason"] is None


def test_none_without_a_priced_provider(tmp_path: Path) -> None:
    con = connect(tmp_path / "r.duckdb")
    unpriced = {**REPORT_SCENARIO, "providers": REPORT_SCENARIO["providers"][1:]}
    store_run(con, "r2", unpriced, {("own", 0): [ok_result(0, 10.0, [1.0])]})
    assert run_spend(con, "r2") is None
