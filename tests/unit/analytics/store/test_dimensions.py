"""A run's dimension rows: provider pricing and deployment, regions and SLOs, with the
GPU-hour price resolved once (scenario, else catalog) and stored with its source."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from analytics.store.db import connect
from analytics.store.dimensions import backfill_dimensions, gpu_hour_price, write_dimensions
from scenarios.catalog import default_catalog
from tests.support.analytics_builders import scenario

PROVIDERS: list[dict[str, Any]] = [
    {
        "name": "api",
        "kind": "simulated",
        "pricing": {"input_per_mtok": 0.8, "output_per_mtok": 1.2},
    },
    {"name": "rented", "kind": "simulated", "deployment": {"hardware": "h100", "gpus": 8}},
    {
        "name": "own",
        "kind": "simulated",
        "deployment": {"hardware": "h100", "gpus": 2, "gpu_hour_usd": 2.0, "quantization": "fp8"},
    },
    {"name": "bought", "kind": "simulated", "deployment": {"hardware": "m3-ultra", "gpus": 1}},
]


def test_gpu_hour_price_comes_from_the_scenario_else_the_catalog() -> None:
    api, rented, own, bought = scenario(PROVIDERS).providers
    assert gpu_hour_price(api) == (None, None)  # no deployment: priced per token
    catalog_price = default_catalog().get_hardware("h100").gpu_hour_usd
    assert catalog_price is not None
    assert gpu_hour_price(rented) == (catalog_price, "catalog")
    assert gpu_hour_price(own) == (2.0, "scenario")
    assert gpu_hour_price(bought) == (None, None)  # the catalog has no rental price


def test_dimensions_are_written_once_per_run_and_replaced(tmp_path: Path) -> None:
    con = connect(tmp_path / "dims.duckdb")
    spec = scenario(PROVIDERS, regions=["eu", "us"])
    write_dimensions(con, "r1", spec)
    write_dimensions(con, "r1", spec)  # idempotent: INSERT OR REPLACE
    rows = con.execute(
        "SELECT provider, input_per_mtok, hardware, gpus, quantization, gpu_hour_usd, "
        "gpu_hour_source FROM providers WHERE run_id = 'r1' ORDER BY provider"
    ).fetchall()
    h100 = default_catalog().get_hardware("h100").gpu_hour_usd
    assert rows == [
        ("api", 0.8, None, None, None, None, None),
        ("bought", None, "m3-ultra", 1, "fp16", None, None),
        ("own", None, "h100", 2, "fp8", 2.0, "scenario"),
        ("rented", None, "h100", 8, "fp16", h100, "catalog"),
    ]
    assert con.execute("SELECT region FROM regions WHERE run_id = 'r1' ORDER BY 1").fetchall() == [
        ("eu",),
        ("us",),
    ]
    slo = spec.slo
    assert con.execute(
        "SELECT ttft_ms, tpot_ms, e2e_ms FROM slos WHERE run_id = 'r1'"
    ).fetchone() == (
        slo.ttft_ms,
        slo.tpot_ms,
        slo.e2e_ms,
    )


def test_backfill_writes_runs_without_dimensions_and_skips_unreadable_ones(tmp_path: Path) -> None:
    con = connect(tmp_path / "old.duckdb")
    now = dt.datetime.now(dt.UTC)
    # Runs as schema v1 stored them: a scenario, no dimension rows.
    con.execute(
        "INSERT INTO runs VALUES ('old', 'x', ?, ?, NULL, 'finished')",
        [scenario(PROVIDERS[:1]).model_dump_json(), now],
    )
    con.execute(
        "INSERT INTO runs VALUES ('odd', 'x', '{\"no longer\": \"a scenario\"}', ?, NULL, 'finished')",
        [now],
    )
    assert backfill_dimensions(con) == 1
    assert con.execute("SELECT run_id, provider FROM providers").fetchall() == [("old", "api")]
    assert con.execute("SELECT run_id FROM slos").fetchall() == [("old",)]
    assert backfill_dimensions(con) == 0  # nothing left that can be read
