"""``tokenbench run`` and ``tokenbench demo``: a scenario on the embedded default (a local
Redis and regional workers started for the run), or on the Redis the settings name."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Annotated

import duckdb
import typer
from celery import Celery
from redis.asyncio import Redis

from analytics.db import connect
from analytics.report import build_report
from api.cli.console import OutputFormat, stderr, stdout
from api.cli.errors import exit_for, load_or_exit
from scenarios.errors import BadInput, Unavailable
from scenarios.loader import ScenarioError
from scenarios.model import Scenario
from scenarios.settings import get_settings
from scenarios.wire import REDIS_CLIENT_OPTIONS, RunState
from workers.secrets import bindings_json, is_reserved, merge_bindings, owner_bindings


def _check_keys(scenario: Scenario) -> None:
    """Local workers inherit this environment: a missing key variable is an error now,
    and so is a tokenbench setting named as a key (it is never sent to a provider)."""
    for provider in scenario.providers:
        for variable in provider.secret_env_vars():
            if is_reserved(variable):
                raise exit_for(
                    BadInput(
                        f"provider {provider.name!r}: variable {variable} is a tokenbench "
                        "setting and is never sent to a provider"
                    )
                )
            if not os.environ.get(variable):
                raise exit_for(
                    BadInput(
                        f"provider {provider.name!r}: environment variable {variable} is not set"
                    )
                )


def run(
    scenario_path: Annotated[Path, typer.Argument(help="Scenario file (YAML or JSON).")],
    db: Annotated[Path | None, typer.Option(help="DuckDB file to append results to.")] = None,
    output: Annotated[OutputFormat, typer.Option("--format", help="Report format.")] = (
        OutputFormat.table
    ),
) -> None:
    """Run a scenario: start what is missing (Redis, regional workers), print the report."""
    _run_scenario(load_or_exit(scenario_path), db, output)


DEMO_SCENARIO = "h100-vs-h200-405b.yaml"


def demo(
    db: Annotated[Path | None, typer.Option(help="DuckDB file to append results to.")] = None,
    output: Annotated[OutputFormat, typer.Option("--format", help="Report format.")] = (
        OutputFormat.table
    ),
) -> None:
    """Run the shipped example: simulated 8×H100 FP8 vs 8×H200 FP16 405B vs a hosted API."""
    from importlib import resources  # noqa: PLC0415

    example = resources.files("scenarios").joinpath("examples", DEMO_SCENARIO)
    _run_scenario(load_or_exit(Path(str(example))), db, output)


def _run_scenario(scenario: Scenario, db: Path | None, output: OutputFormat) -> None:
    from api.local.embedded import local_stack  # noqa: PLC0415
    from workers.celery_app import app as celery_app  # noqa: PLC0415

    settings = get_settings()
    secret_hosts = None
    if settings.redis.url is None:
        _check_keys(scenario)
        # The embedded default runs the user's own scenario on the user's own machine:
        # its workers may send each provider's key to that provider's own hosts.
        owned = merge_bindings(settings.worker.secret_hosts, owner_bindings(scenario.providers))
        secret_hosts = bindings_json(owned)
    _interrupt_on_sigterm()
    db_path = db or settings.duckdb.path
    con = connect(db_path)
    scenario = _local_datasets(scenario, con)
    stdout.print(f"[bold]tokenbench[/bold] · scenario {scenario.name} · results in {db_path}")
    try:
        with local_stack(scenario.regions, settings.redis.url, secret_hosts) as redis_url:
            os.environ["TOKENBENCH__REDIS__URL"] = redis_url
            get_settings.cache_clear()
            celery_app.conf.broker_url = redis_url
            state, run_id = asyncio.run(_drive(scenario, redis_url, con, celery_app))
    except KeyboardInterrupt:
        stderr.print("[yellow]interrupted: partial results are stored, run marked cancelled")
        raise typer.Exit(130) from None
    except RuntimeError as exc:
        # The local stack could not start, or Redis stayed unreachable: operational.
        raise exit_for(Unavailable(str(exc))) from None
    from api.cli.console import print_report  # noqa: PLC0415

    print_report(stdout, build_report(con, run_id), output.value)
    con.close()
    if state != RunState.FINISHED:
        raise typer.Exit(1)


def _local_datasets(scenario: Scenario, con: duckdb.DuckDBPyConnection) -> Scenario:
    """The user's own workload files stored as datasets in the local DuckDB file, so the
    run takes the same path as in a deployment (workers never read files)."""
    from analytics.datasets import DatasetStore  # noqa: PLC0415
    from api.cli.datasets import store_local_datasets  # noqa: PLC0415

    try:
        return store_local_datasets(scenario, DatasetStore(con), get_settings().api)
    except ScenarioError as exc:
        raise exit_for(exc, f"invalid scenario\n{exc}") from None


def _interrupt_on_sigterm() -> None:
    """SIGTERM (and SIGINT, even when inherited as ignored) stop a run like Ctrl-C does:
    workers are told to stop, what arrived is stored, local processes are cleaned up."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: signal.raise_signal(signal.SIGINT))


async def _drive(
    scenario: Scenario, redis_url: str, con: duckdb.DuckDBPyConnection, celery_app: Celery
) -> tuple[str, str]:
    from api.cli.console import StageProgress  # noqa: PLC0415
    from api.control.plane import ControlPlane  # noqa: PLC0415
    from api.control.run_views import live_view  # noqa: PLC0415

    redis = Redis.from_url(redis_url, **REDIS_CLIENT_OPTIONS)
    plane = ControlPlane(redis, con, celery_app, get_settings().control)
    try:
        with StageProgress(stdout) as progress:
            coordinator = await plane.submit(scenario)
            run_id = coordinator.run_id
            try:
                while run_id in plane.runs:
                    await plane.step()
                    progress.update(live_view(coordinator, scenario.name))
            except (asyncio.CancelledError, KeyboardInterrupt):
                await plane.cancel(run_id)
                while run_id in plane.runs:  # store what arrives, then settle as cancelled
                    await plane.step()
                raise
        return plane.store_state(run_id), run_id
    finally:
        await redis.aclose()
