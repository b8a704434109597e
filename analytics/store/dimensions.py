"""A run's dimensions as rows: providers (pricing, deployment), regions and SLOs.

They are copied out of the scenario when a run is created so that SQL can join on them;
the GPU-hour price is resolved at that moment (scenario value, else the hardware
catalog's default) and stored with its source, so that a later catalog change never
rewrites the cost of a past run.
"""

from __future__ import annotations

import duckdb
from pydantic import ValidationError

from scenarios.catalog import UnknownIdError, default_catalog
from scenarios.model import Scenario
from scenarios.providers.kinds import AnyProvider


def gpu_hour_price(provider: AnyProvider) -> tuple[float | None, str | None]:
    """USD per GPU-hour of a self-hosted provider and where it comes from."""
    deployment = provider.deployment
    if deployment is None:
        return None, None
    if deployment.gpu_hour_usd is not None:
        return deployment.gpu_hour_usd, "scenario"
    try:
        hardware = default_catalog().get_hardware(deployment.hardware)
    except UnknownIdError:
        return None, None
    if hardware.gpu_hour_usd is None:
        return None, None
    return hardware.gpu_hour_usd, "catalog"


def write_dimensions(con: duckdb.DuckDBPyConnection, run_id: str, scenario: Scenario) -> None:
    """Insert (or replace) the provider, region and SLO rows of ``run_id``."""
    rows = []
    for provider in scenario.providers:
        price, source = gpu_hour_price(provider)
        pricing, deployment = provider.pricing, provider.deployment
        rows.append(
            [
                run_id,
                provider.name,
                provider.kind,
                provider.model,
                None if pricing is None else pricing.input_per_mtok,
                None if pricing is None else pricing.output_per_mtok,
                None if deployment is None else deployment.hardware,
                None if deployment is None else deployment.gpus,
                None if deployment is None else deployment.quantization,
                None if deployment is None else deployment.model,
                price,
                source,
                None if pricing is None else pricing.cached_input_per_mtok,
            ]
        )
    con.executemany(
        "INSERT OR REPLACE INTO providers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
    )
    con.executemany(
        "INSERT OR REPLACE INTO regions VALUES (?, ?)", [[run_id, r] for r in scenario.regions]
    )
    slo = scenario.report_slo()
    con.execute(
        "INSERT OR REPLACE INTO slos VALUES (?, ?, ?, ?)",
        [run_id, slo.ttft_ms, slo.tpot_ms, slo.e2e_ms],
    )


def backfill_dimensions(con: duckdb.DuckDBPyConnection) -> int:
    """Write the dimension rows of runs that have none (runs stored under schema v1)."""
    missing = con.execute(
        "SELECT run_id, scenario FROM runs "
        "WHERE run_id NOT IN (SELECT run_id FROM slos) ORDER BY created_at"
    ).fetchall()
    done = 0
    for run_id, text in missing:
        try:
            scenario = Scenario.model_validate_json(text)
        except ValidationError:
            # A scenario this version can no longer read: its records still report,
            # without cost or SLO columns, rather than blocking the upgrade.
            continue
        write_dimensions(con, str(run_id), scenario)
        done += 1
    return done
