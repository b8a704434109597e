"""api/cli/cost_output.py: a dry run's plan and the ledger as terminal tables and JSON."""

from __future__ import annotations

import io
import json

from rich.console import Console

from api.cli.cost_output import print_dry_run, print_spend
from api.control.cost_plan import cost_plan
from api.control.spend import DryRun, TeamBudget
from scenarios.model import Scenario
from tests.support.builders import REPORT_SCENARIO

BUDGET = TeamBudget("t", 10.0, 1.5, 8.5, "TOKENBENCH__TEAMS__MONTHLY_BUDGET_USD")


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200), out


def test_plan_table_names_rows_bounds_and_budget() -> None:
    scenario = Scenario.model_validate(
        {**REPORT_SCENARIO, "load": {"concurrency": [1], "requests_per_level": 10}}
    )
    answer = DryRun(cost_plan(scenario), BUDGET, None).to_json()
    console, out = _console()
    print_dry_run(console, answer, as_json=False)
    text = out.getvalue()
    assert "not priced" in text and "0.8, 1.2" in text
    assert "left $8.5000" in text and "admitted" in text
    console, out = _console()
    print_dry_run(console, answer, as_json=True)
    assert json.loads(out.getvalue())["plan"]["requests"] == 30


def test_unbounded_plan_and_refusal_are_said() -> None:
    scenario = Scenario.model_validate(
        {**REPORT_SCENARIO, "load": {"concurrency": [1], "duration_s": 5}}
    )
    answer = DryRun(cost_plan(scenario), BUDGET, "refused: no bound").to_json()
    console, out = _console()
    print_dry_run(console, answer, as_json=False)
    assert "unbounded" in out.getvalue() and "refused: no bound" in out.getvalue()


def test_spend_table() -> None:
    answer = {
        "team": "t", "since": "2026-12-01", "until": "2026-12-04", "group": "day",
        "rows": [{"team": "t", "day": "2026-12-02", "runs": 2, "input_tokens": 10,
                  "output_tokens": 5, "usd": 0.25}],
        "total_usd": 0.25, "budget": BUDGET.to_json(),
    }  # fmt: skip
    console, out = _console()
    print_spend(console, answer, as_json=False)
    assert "2026-12-02" in out.getvalue() and "$0.2500" in out.getvalue()
