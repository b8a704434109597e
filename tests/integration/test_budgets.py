"""Dry runs, budgets and the spend ledger over real HTTP: a real control plane
(`tokenbench serve`, team budget $100 a month), a real worker in region us, the
simulated provider priced per token."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import API_TOKEN, CliResult, Proc, start_control_plane, wait_for_run

pytestmark = pytest.mark.integration

MONTHLY_BUDGET = 100.0
PRICE_IN, PRICE_OUT = 3.0, 5.0


def priced(
    load: dict[str, Any],
    price_in: float = PRICE_IN,
    price_out: float = PRICE_OUT,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "name": "budget",
        "providers": [
            {
                "name": "paid",
                "kind": "simulated",
                "simulate": {"ttft_ms": 20, "itl_ms": 2},
                "pricing": {"input_per_mtok": price_in, "output_per_mtok": price_out},
            }
        ],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 40},
                    "output_tokens": {"dist": "uniform", "min": 4, "max": 12},
                }
            ]
        },
        "load": load,
        "regions": ["us"],
        **extra,
    }


@pytest.fixture(scope="module")
def plane(
    us_worker: Proc, worker_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[httpx.Client, str]]:
    tmp = tmp_path_factory.mktemp("budgets")
    env = {**worker_env, "TOKENBENCH__TEAMS__MONTHLY_BUDGET_USD": str(MONTHLY_BUDGET)}
    proc, base = start_control_plane(env, tmp / "api.duckdb", tmp / "api.log")
    with httpx.Client(
        base_url=base, headers={"authorization": f"Bearer {API_TOKEN}"}, timeout=60
    ) as client:
        yield client, base
    proc.stop()


def sql(client: httpx.Client, query: str) -> list[dict[str, Any]]:
    answer = client.post("/v1/sql", json={"query": query, "max_staleness_s": 0})
    assert answer.status_code == 200, answer.text
    rows: list[dict[str, Any]] = answer.json()["rows"]
    return rows


def test_dry_run_answers_the_plan_and_creates_nothing(plane: tuple[httpx.Client, str]) -> None:
    client, _ = plane
    before = client.get("/v1/runs").json()
    body = {"scenario": priced({"concurrency": [1, 2], "requests_per_level": 10})}
    answer = client.post("/v1/runs", params={"dry_run": "true"}, json=body)
    assert answer.status_code == 200, answer.text
    got = answer.json()
    assert got["dry_run"] is True and got["admitted"] is True
    (row,) = got["plan"]["rows"]
    # 40 planned tokens: + 10 % + 32 = 76 per request; 12 output tokens at most.
    assert (row["provider"], row["region"], row["requests"]) == ("paid", "us", 20)
    assert (row["prompt_tokens"], row["output_tokens"]) == (20 * 76, 20 * 12)
    assert row["cost_bound_usd"] == pytest.approx((20 * 76 * 3.0 + 20 * 12 * 5.0) / 1e6)
    assert got["budget"]["monthly_budget_usd"] == MONTHLY_BUDGET
    assert got["budget"]["setting"] == "TOKENBENCH__TEAMS__MONTHLY_BUDGET_USD"
    assert client.get("/v1/runs").json() == before


def test_a_bound_above_the_budget_left_is_refused_with_the_figures(
    plane: tuple[httpx.Client, str],
) -> None:
    client, _ = plane
    big = priced({"concurrency": [1], "requests_per_level": 1000}, price_in=500_000.0)
    answer = client.post("/v1/runs", json={"scenario": big})
    assert answer.status_code == 403, answer.text
    detail = answer.json()["detail"]
    assert "TOKENBENCH__TEAMS__MONTHLY_BUDGET_USD" in detail
    assert "$38,000.0600" in detail  # 1000 × (76 × $500,000 + 12 × $5) per 1M
    assert answer.json()["budget"]["refused_by"] == "TOKENBENCH__TEAMS__MONTHLY_BUDGET_USD"
    # The dry run says the same without refusing to answer.
    dry = client.post("/v1/runs", params={"dry_run": "true"}, json={"scenario": big}).json()
    assert dry["admitted"] is False and "TOKENBENCH__TEAMS__MONTHLY_BUDGET_USD" in dry["refused"]
    # A cap below the bound is refused by the cap.
    capped = priced({"concurrency": [1], "requests_per_level": 10}, budget={"max_cost_usd": 1e-6})
    answer = client.post("/v1/runs", json={"scenario": capped})
    assert answer.status_code == 403
    assert "budget.max_cost_usd" in answer.json()["detail"]


def test_ledger_is_the_sum_of_the_records_times_price(plane: tuple[httpx.Client, str]) -> None:
    client, _ = plane
    body = {"scenario": priced({"concurrency": [2], "requests_per_level": 12})}
    created = client.post("/v1/runs", json=body)
    assert created.status_code == 201, created.text
    run_id = created.json()["id"]
    assert wait_for_run(client, run_id)["state"] == "finished"
    (recorded,) = sql(
        client,
        "SELECT sum((coalesce(prompt_tokens, planned_prompt_tokens) * 3.0 "
        "+ coalesce(completion_tokens, 0) * 5.0) / 1e6) AS usd, count(*) AS n "
        f"FROM request_records WHERE run_id = '{run_id}'",
    )
    (ledger,) = sql(
        client,
        "SELECT sum(usd) AS usd, max(cost_bound_usd) AS bound FROM spend_ledger "
        f"JOIN run_cost_bounds USING (run_id) WHERE run_id = '{run_id}'",
    )
    assert recorded["n"] == 12 and recorded["usd"] > 0
    assert ledger["usd"] == pytest.approx(recorded["usd"], rel=1e-12)
    assert ledger["bound"] >= ledger["usd"]
    spend = client.get("/v1/spend", params={"group": "run"}).json()
    (mine,) = [row for row in spend["rows"] if row["run"] == run_id]
    assert mine["usd"] == pytest.approx(recorded["usd"], rel=1e-12)
    assert spend["budget"]["spent_this_month_usd"] >= mine["usd"]


def test_a_run_reaching_its_cap_stops_with_reason_budget_and_keeps_its_records(
    plane: tuple[httpx.Client, str],
) -> None:
    client, _ = plane
    # A closed loop over a duration has no bound of its own: its cap is its bound.
    cap = 0.02
    scenario = priced(
        {"concurrency": [2], "duration_s": 120},
        price_in=100.0,
        price_out=100.0,
        budget={"max_cost_usd": cap},
    )
    created = client.post("/v1/runs", json={"scenario": scenario})
    assert created.status_code == 201, created.text
    run_id = created.json()["id"]
    view = wait_for_run(client, run_id, timeout_s=90)
    assert view["state"] == "cancelled" and view["reason"] == "budget"
    assert view["requests_done"] > 0
    assert view["reason_detail"].startswith("budget: the run spent")
    assert "budget.max_cost_usd" in view["reason_detail"]
    (stored,) = sql(
        client,
        f"SELECT count(*) AS n FROM request_records WHERE run_id = '{run_id}'",
    )
    (ledger,) = sql(client, f"SELECT sum(usd) AS usd FROM spend_ledger WHERE run_id = '{run_id}'")
    assert stored["n"] >= view["requests_done"]
    assert ledger["usd"] >= cap


def test_cli_submit_dry_run_and_spend(
    plane: tuple[httpx.Client, str], tokenbench_in_process: Callable[..., CliResult], tmp_path: Any
) -> None:
    _, base = plane
    path = tmp_path / "s.json"
    path.write_text(json.dumps(priced({"concurrency": [1], "requests_per_level": 5})))
    env: dict[str, str | None] = {"TOKENBENCH_TOKEN": API_TOKEN}
    table = tokenbench_in_process("submit", str(path), "--server", base, "--dry-run", env=env)
    assert table.code == 0, table.stderr
    # The header may wrap ("cost" over "bound") in a narrow terminal: the words, not the line.
    words = table.stdout.split()
    assert {"cost", "bound", "admitted:"} <= set(words), table.stdout
    out = tokenbench_in_process(
        "submit", str(path), "--server", base, "--dry-run", "--format", "json", env=env
    )
    assert json.loads(out.stdout)["plan"]["rows"][0]["requests"] == 5
    spent = tokenbench_in_process("spend", "--server", base, "--format", "json", env=env)
    assert spent.code == 0, spent.stderr
    assert json.loads(spent.stdout)["team"] == "default"


def random_scenario(rng: random.Random) -> dict[str, Any]:
    """A small priced scenario of a random shape and random lengths."""
    low = rng.randint(1, 200)
    lengths = [
        {"dist": "fixed", "value": rng.randint(1, 300)},
        {"dist": "uniform", "min": low, "max": low + rng.randint(0, 300)},
        {"dist": "lognormal", "mean": rng.randint(20, 400), "sigma": 0.5, "max": 1000},
        {"dist": "normal", "mean": rng.randint(20, 200), "std": 30, "min": 1, "max": 400},
    ]
    mix = [
        {
            "weight": rng.randint(1, 5),
            "prompt_tokens": rng.choice(lengths),
            "output_tokens": {"dist": "uniform", "min": 1, "max": rng.randint(1, 40)},
        }
        for _ in range(rng.randint(1, 3))
    ]
    shapes: list[dict[str, Any]] = [
        {"concurrency": [rng.randint(1, 4)], "requests_per_level": rng.randint(3, 15)},
        {
            "rate": {"rps": [rng.randint(5, 20)], "arrival": rng.choice(["poisson", "constant"])},
            "duration_s": rng.randint(1, 3),
        },
        {"sweep": {"points": 1}, "requests_per_level": rng.randint(5, 10)},
    ]
    data = priced(rng.choice(shapes), price_in=rng.uniform(0.1, 50), price_out=rng.uniform(0.1, 50))
    data["workload"] = {"mix": mix, "shared_prefix_tokens": rng.choice([0, 0, 64])}
    data["seed"] = rng.randint(0, 1000)
    return data


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_bound_is_never_below_the_recorded_spend(
    plane: tuple[httpx.Client, str], seed: int
) -> None:
    client, _ = plane
    scenario = random_scenario(random.Random(seed))
    created = client.post("/v1/runs", json={"scenario": scenario})
    assert created.status_code == 201, created.text
    run_id = created.json()["id"]
    assert wait_for_run(client, run_id)["state"] == "finished"
    (row,) = sql(
        client,
        "SELECT b.cost_bound_usd AS bound, "
        "(SELECT sum(usd) FROM spend_ledger WHERE run_id = b.run_id) AS spent "
        f"FROM run_cost_bounds AS b WHERE b.run_id = '{run_id}'",
    )
    assert row["spent"] > 0
    assert row["bound"] >= row["spent"], scenario
