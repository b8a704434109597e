"""The prefix cache in the report (analytics/report/prefix_cache.py): the client hit rate
and the target per stage, cache resets, and cost at the cached-input price, the same from
the raw records and from the stored pre-aggregates (docs/metrics.md, docs/analytics.md)."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from analytics.report.build import build_report
from analytics.report.prefix_cache import FIELDS, SERVER_FIELD, with_server_hit_rate
from analytics.report.stored import ExactLimits
from analytics.store.db import connect
from analytics.store.runs import CacheReset, RunStore
from tests.support.builders import REPORT_SCENARIO, evenly_paced, store_run

FORCE_STORED = ExactLimits(ok_requests=0, itl_gaps=0)
N = 11  # evenly_paced: 50 prompt and 100 output tokens each


def _scenario(cached_price: float | None, target: float | None = None) -> dict[str, Any]:
    scenario = copy.deepcopy(REPORT_SCENARIO)
    scenario["providers"] = [
        {
            "name": "api",
            "kind": "simulated",
            "pricing": {
                "input_per_mtok": 0.8,
                "output_per_mtok": 1.2,
                **({} if cached_price is None else {"cached_input_per_mtok": cached_price}),
            },
        }
    ]
    if target is not None:
        scenario["workload"]["prefix_cache"] = {"target_hit_rate": target}
    return scenario


@pytest.mark.parametrize("limits", [None, FORCE_STORED], ids=["records", "stored"])
def test_cached_tokens_are_priced_at_the_cached_input_price(
    tmp_path: Path, limits: ExactLimits | None
) -> None:
    con = connect(tmp_path / "c.duckdb")
    results = [replace(r, cached_tokens=20) for r in evenly_paced(N)]
    store_run(con, "run", _scenario(0.2, target=0.5), {("api", 0): results})
    row = build_report(con, "run", exact_limits=limits).stages[0]
    # 20 of 50 prompt tokens at 0.2, the other 30 at 0.8: 0.56 USD per 1M prompt tokens.
    effective = (30 * 0.8 + 20 * 0.2) / 50
    assert row["cost_per_mtok_input"] == pytest.approx(effective)
    assert row["cost_usd"] == pytest.approx(N * (50 * effective + 100 * 1.2) / 1e6)
    assert row["cache_hit_pct"] == pytest.approx(40.0)
    assert row["cache_target_pct"] == pytest.approx(50.0)
    assert row["cached_tokens"] == N * 20 and row["cache_reported"] == N
    assert {*FIELDS, SERVER_FIELD} <= set(row) and row[SERVER_FIELD] is None


def test_without_a_cached_price_or_a_count_every_prompt_token_costs_the_input_price(
    tmp_path: Path,
) -> None:
    con = connect(tmp_path / "c.duckdb")
    cached = [replace(r, cached_tokens=20) for r in evenly_paced(N)]
    store_run(con, "priced", _scenario(None), {("api", 0): cached})
    row = build_report(con, "priced").stages[0]
    assert row["cost_per_mtok_input"] == pytest.approx(0.8)
    assert row["cache_hit_pct"] == pytest.approx(40.0)
    # No usage count: unknown, not a 0 % hit rate, and no discount.
    store_run(con, "unknown", _scenario(0.2), {("api", 0): evenly_paced(N)})
    row = build_report(con, "unknown").stages[0]
    assert row["cost_per_mtok_input"] == pytest.approx(0.8)
    assert "cache_hit_pct" not in row  # nothing to show: the stage rows stay as they were


def test_a_stage_shows_its_cache_resets_and_its_target_without_usage(tmp_path: Path) -> None:
    con = connect(tmp_path / "c.duckdb")
    store_run(con, "run", _scenario(None, target=0.9), {("api", 0): evenly_paced(N)})
    store = RunStore(con)
    for status, http, at in (("ok", 200, 2.0), ("failed", 404, 1.0)):
        store.cache_reset(
            CacheReset("run", 0, "api", "local", "w", "s0.api.local", 1, at, status, http, None)
        )
    row = build_report(con, "run").stages[0]
    assert row["cache_reset"] == "failed (404), ok"  # in the order they were sent
    assert row["cache_target_pct"] == pytest.approx(90.0)
    assert row["cache_hit_pct"] is None and row["cache_reported"] == 0


def test_the_servers_hit_rate_stands_beside_the_clients_where_telemetry_has_it() -> None:
    stages = [
        {"provider": "api", "stage": 0, "region": "eu", "cache_reported": 3},
        {"provider": "api", "stage": 1, "region": "eu", "cache_reported": 3},
        {"provider": "own", "stage": 0, "region": "eu"},  # no prefix-cache fields
    ]
    telemetry = [
        {"provider": "api", "stage": 0, "region": "eu", "server_prefix_cache_hit_rate": 0.25},
        {"provider": "api", "stage": 1, "region": "eu", "server_prefix_cache_hit_rate": None},
        {"provider": "own", "stage": 0, "region": "eu", "server_prefix_cache_hit_rate": 0.5},
    ]
    rows = with_server_hit_rate(stages, telemetry)
    assert rows[0][SERVER_FIELD] == pytest.approx(25.0)
    assert SERVER_FIELD not in rows[1]  # the server exposed none: unknown
    assert SERVER_FIELD not in rows[2]  # nothing of the cache to stand beside
