"""api/control/spend.py: the admission rule (bound against cap and budget left, each
refusal naming its figures and setting), the ledger from records × price, and the
control loop's stop decision, on a real DuckDB file."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import duckdb
import pytest

from analytics.store.db import connect
from api.access.teams import TeamStore
from api.control import spend
from api.control.cost_plan import cost_plan
from api.control.spend import (
    OverBudget,
    SpendWatch,
    TeamBudget,
    check_budget,
    ledger_rows,
    month_spend,
    record_bound,
    stop_reason,
    update_ledger,
)
from scenarios.model import Scenario
from scenarios.settings import TeamSettings
from scenarios.wire.contract import RunState
from tests.support.builders import REPORT_SCENARIO, ok_result, store_run

SETTING = "TOKENBENCH__TEAMS__MONTHLY_BUDGET_USD"


def plan_of(load: dict[str, Any], **extra: Any) -> Any:
    data = {**REPORT_SCENARIO, "load": load, **extra}
    return cost_plan(Scenario.model_validate(data))


def budget(left: float | None, monthly: float | None = 10.0, spent: float = 0.0) -> TeamBudget:
    return TeamBudget("t", monthly, spent, left, SETTING)


def test_admitted_within_the_budget_left() -> None:
    check_budget(plan_of({"concurrency": [1], "requests_per_level": 10}), budget(10.0))


def test_refused_above_the_budget_left_naming_figures_and_setting() -> None:
    plan = plan_of({"concurrency": [1], "requests_per_level": 10})
    assert plan.cost_bound_usd is not None
    with pytest.raises(OverBudget) as refused:
        check_budget(plan, budget(plan.cost_bound_usd / 2, monthly=1.0, spent=0.99))
    message = str(refused.value)
    assert SETTING in message and f"${plan.cost_bound_usd:,.4f}" in message
    assert "spent $0.9900" in message
    assert refused.value.http_status == 403
    assert refused.value.public_fields()["budget"]["refused_by"] == SETTING  # type: ignore[index]


def test_cap_below_the_bound_is_refused_by_the_cap() -> None:
    plan = plan_of({"concurrency": [1], "requests_per_level": 10}, budget={"max_cost_usd": 1e-9})
    with pytest.raises(OverBudget, match=r"budget\.max_cost_usd"):
        check_budget(plan, budget(None, monthly=None))


def test_unbounded_run_needs_a_cap_under_a_budget() -> None:
    unbounded = plan_of({"concurrency": [1], "duration_s": 5})
    with pytest.raises(OverBudget, match="no upper bound"):
        check_budget(unbounded, budget(10.0))
    check_budget(unbounded, budget(None, monthly=None))  # unlimited: admitted
    capped = plan_of({"concurrency": [1], "duration_s": 5}, budget={"max_cost_usd": 2.0})
    check_budget(capped, budget(10.0))
    with pytest.raises(OverBudget, match=r"cap \(budget\.max_cost_usd\) \$2\.0000"):
        check_budget(capped, budget(1.0))


def test_unpriced_run_is_never_refused() -> None:
    data = {**REPORT_SCENARIO, "load": {"concurrency": [1], "duration_s": 5}}
    data["providers"] = [p for p in data["providers"] if "pricing" not in p]
    check_budget(cost_plan(Scenario.model_validate(data)), budget(0.0))


@pytest.fixture
def con(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    con = connect(tmp_path / "spend.duckdb")
    # Provider api: $0.8 / $1.2 per 1M; 3 requests of 50 prompt, 100 output tokens each.
    results = [ok_result(i * 10**9, 10.0, [1.0] * 99) for i in range(3)]
    store_run(con, "r1", REPORT_SCENARIO, {("api", 0): results, ("gpu", 0): results})
    return con


def test_ledger_is_records_times_price(con: duckdb.DuckDBPyConnection) -> None:
    spent = update_ledger(con, "r1", "t")
    assert spent == pytest.approx((150 * 0.8 + 300 * 1.2) / 1e6)
    rows = ledger_rows(con, "t", dt.date(2000, 1, 1), dt.date(2100, 1, 1), "provider")
    assert [(r["provider"], r["input_tokens"], r["output_tokens"]) for r in rows] == [
        ("api", 150, 300)
    ]
    # Upserted, never doubled.
    assert update_ledger(con, "r1", "t") == pytest.approx(spent)
    assert ledger_rows(con, None, dt.date(2000, 1, 1), dt.date(2100, 1, 1), "run")[0]["runs"] == 1


def test_watch_stops_a_run_at_its_cap(con: duckdb.DuckDBPyConnection) -> None:
    record_bound(con, "r1", "t", None)
    watch = SpendWatch(con, TeamSettings())
    assert watch.over("r1") is None
    con.execute("UPDATE run_cost_bounds SET max_cost_usd = 1e-6 WHERE run_id = 'r1'")
    reason = watch.over("r1")
    assert reason is not None and "budget.max_cost_usd" in reason
    watch.stopped("r1", reason)
    assert stop_reason(con, "r1") == ("budget", reason)


def test_watch_stops_a_run_at_its_teams_month(con: duckdb.DuckDBPyConnection) -> None:
    record_bound(con, "r1", "t", None)
    watch = SpendWatch(con, TeamSettings(monthly_budget_usd=1e-6))
    reason = watch.over("r1")
    assert reason is not None and "team t" in reason and SETTING in reason
    assert month_spend(con, "t") > 1e-6


def test_a_teams_own_budget_is_named_as_its_own_setting(con: duckdb.DuckDBPyConnection) -> None:

    TeamStore(con, TeamSettings()).update("t", {"monthly_budget_usd": 1e-6})
    record_bound(con, "r1", "t", None)
    reason = SpendWatch(con, TeamSettings()).over("r1")
    assert reason is not None and "team t's monthly_budget_usd" in reason


def test_check_is_due_every_few_seconds_and_only_on_new_records(
    con: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    record_bound(con, "r1", "t", None)
    con.execute("UPDATE run_cost_bounds SET max_cost_usd = 1e-6 WHERE run_id = 'r1'")
    watch = SpendWatch(con, TeamSettings())
    run = SimpleNamespace(
        run_id="r1", state=RunState.RUNNING, cancel_deadline=None, records_ingested=6
    )
    clock = [100.0]
    monkeypatch.setattr(spend.time, "monotonic", lambda: clock[0])
    reason = asyncio.run(watch.check(run))  # type: ignore[arg-type]
    assert reason is not None and stop_reason(con, "r1")[0] == "budget"
    clock[0] += 1.0
    run.records_ingested = 7
    assert not watch.due(run)  # type: ignore[arg-type]  # too soon
    clock[0] += spend.SPEND_CHECK_S
    run.records_ingested = 7
    assert watch.due(run)  # type: ignore[arg-type]
    clock[0] += spend.SPEND_CHECK_S
    assert not watch.due(run)  # type: ignore[arg-type]  # nothing new recorded


def test_runs_going_hold_their_bound_less_their_spend(con: duckdb.DuckDBPyConnection) -> None:
    plan = plan_of({"concurrency": [1], "requests_per_level": 10})
    assert plan.cost_bound_usd is not None
    record_bound(con, "r1", "t", plan)
    spent = update_ledger(con, "r1", "t")
    policy = TeamStore(con, TeamSettings(monthly_budget_usd=1.0)).policy("t")
    con.execute("UPDATE runs SET state = 'running' WHERE run_id = 'r1'")
    going = spend.team_budget(con, policy)
    assert going.reserved_usd == pytest.approx(plan.cost_bound_usd - spent)
    assert going.left_usd == pytest.approx(1.0 - spent - (plan.cost_bound_usd - spent))
    # A second run whose bound fits the budget less the spend, but not less what the
    # first may still spend, is refused.
    with pytest.raises(OverBudget) as refused:
        check_budget(plan, dataclasses.replace(going, left_usd=plan.cost_bound_usd / 2))
    assert "held for its runs going" in str(refused.value)
    # Once the run has ended it holds nothing.
    con.execute("UPDATE runs SET state = 'finished' WHERE run_id = 'r1'")
    ended = spend.team_budget(con, policy)
    assert ended.reserved_usd == 0.0
    assert ended.left_usd == pytest.approx(1.0 - spent)
