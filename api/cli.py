"""The ``tokenbench`` command line.

Exit codes: 0 success, 1 a run that ended failed or an operational error, 2 bad input
(scenario, options), 130 interrupted; errors are mapped in one place, api/cli_errors.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import duckdb
import typer
from celery import Celery
from redis.asyncio import Redis
from rich.console import Console

from analytics.db import connect
from analytics.report import build_report
from api.cli_errors import exit_for
from api.gateway import gateway, shadow_app
from api.plan import plan
from api.providers_check import providers_app
from api.report_cli import report, sql
from api.simulate_options import simulate
from scenarios.errors import BadInput, TokenbenchError, Unavailable
from scenarios.loader import ScenarioError, load_scenario
from scenarios.model import Scenario
from scenarios.settings import get_settings
from scenarios.wire import REDIS_CLIENT_OPTIONS
from workers.secrets import bindings_json, is_reserved, merge_bindings, owner_bindings

app = typer.Typer(
    name="tokenbench",
    help="Benchmark LLM inference providers: tail latency, throughput, cost per token.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
# Reports are wide; when output is not a terminal (CI logs, pipes) do not wrap at 80.
console = Console(width=None if Console().is_terminal else 200)
errors = Console(stderr=True, width=None if Console(stderr=True).is_terminal else 200)


class OutputFormat(StrEnum):
    """How results are printed."""

    table = "table"
    json = "json"


def _load(path: Path) -> Scenario:
    try:
        return load_scenario(path)
    except ScenarioError as exc:
        raise exit_for(exc, f"invalid scenario\n{exc}") from None


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


@app.command()
def run(
    scenario_path: Annotated[Path, typer.Argument(help="Scenario file (YAML or JSON).")],
    db: Annotated[Path | None, typer.Option(help="DuckDB file to append results to.")] = None,
    output: Annotated[OutputFormat, typer.Option("--format", help="Report format.")] = (
        OutputFormat.table
    ),
) -> None:
    """Run a scenario: start what is missing (Redis, regional workers), print the report."""
    _run_scenario(_load(scenario_path), db, output)


DEMO_SCENARIO = "h100-vs-h200-405b.yaml"


@app.command()
def demo(
    db: Annotated[Path | None, typer.Option(help="DuckDB file to append results to.")] = None,
    output: Annotated[OutputFormat, typer.Option("--format", help="Report format.")] = (
        OutputFormat.table
    ),
) -> None:
    """Run the shipped example: simulated 8×H100 FP8 vs 8×H200 FP16 405B vs a hosted API."""
    from importlib import resources  # noqa: PLC0415

    example = resources.files("scenarios").joinpath("examples", DEMO_SCENARIO)
    _run_scenario(_load(Path(str(example))), db, output)


def _run_scenario(scenario: Scenario, db: Path | None, output: OutputFormat) -> None:
    from api.embedded import local_stack  # noqa: PLC0415
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
    console.print(f"[bold]tokenbench[/bold] · scenario {scenario.name} · results in {db_path}")
    try:
        with local_stack(scenario.regions, settings.redis.url, secret_hosts) as redis_url:
            os.environ["TOKENBENCH__REDIS__URL"] = redis_url
            get_settings.cache_clear()
            celery_app.conf.broker_url = redis_url
            state, run_id = asyncio.run(_drive(scenario, redis_url, con, celery_app))
    except KeyboardInterrupt:
        errors.print("[yellow]interrupted: partial results are stored, run marked cancelled")
        raise typer.Exit(130) from None
    except RuntimeError as exc:
        # The local stack could not start, or Redis stayed unreachable: operational.
        raise exit_for(Unavailable(str(exc))) from None
    from api.console import print_report  # noqa: PLC0415

    print_report(console, build_report(con, run_id), output.value)
    con.close()
    if state != "finished":
        raise typer.Exit(1)


def _local_datasets(scenario: Scenario, con: duckdb.DuckDBPyConnection) -> Scenario:
    """The user's own workload files stored as datasets in the local DuckDB file, so the
    run takes the same path as in a deployment (workers never read files)."""
    from analytics.datasets import DatasetStore  # noqa: PLC0415
    from api.local_datasets import store_local_datasets  # noqa: PLC0415

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
    from api.console import StageProgress  # noqa: PLC0415
    from api.control_plane import ControlPlane  # noqa: PLC0415
    from api.run_views import live_view  # noqa: PLC0415

    redis = Redis.from_url(redis_url, **REDIS_CLIENT_OPTIONS)
    plane = ControlPlane(redis, con, celery_app, get_settings().control)
    try:
        with StageProgress(console) as progress:
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


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
    db: Annotated[Path | None, typer.Option(help="DuckDB file.")] = None,
) -> None:
    """Run the REST control plane (OpenAPI docs at /docs)."""
    import uvicorn  # noqa: PLC0415

    from api.app import create_app  # noqa: PLC0415
    from api.redis_server import start_redis_server  # noqa: PLC0415
    from api.signals import sigterm_as_interrupt  # noqa: PLC0415
    from workers.celery_app import app as celery_app  # noqa: PLC0415

    # SIGTERM stops the server as Ctrl-C does: gracefully, the embedded Redis too, exit 0.
    sigterm_as_interrupt()
    settings = get_settings()
    if db is not None:
        settings.duckdb.path = db
    server = None
    try:
        if settings.redis.url is None:
            server = start_redis_server()
            settings.redis.url = server.url
            errors.print(
                f"embedded Redis at {server.url}: start workers with "
                f"TOKENBENCH__REDIS__URL={server.url} tokenbench worker --region NAME"
            )
        if not settings.api.tokens:
            errors.print(
                "[yellow]TOKENBENCH__API__TOKENS is empty: every API request will be refused"
            )
        uvicorn.run(create_app(settings, celery_app), host=host, port=port, log_level="info")
    except KeyboardInterrupt:
        pass  # stopped before uvicorn was serving; uvicorn handles it while serving
    finally:
        if server is not None:
            server.stop()


@app.command()
def submit(
    scenario_path: Annotated[Path, typer.Argument(help="Scenario file (YAML or JSON).")],
    server: Annotated[str, typer.Option(help="Control plane URL.")] = "http://127.0.0.1:8080",
    token: Annotated[
        str | None, typer.Option(envvar="TOKENBENCH_TOKEN", help="Bearer token.")
    ] = None,
    wait: Annotated[bool, typer.Option(help="Follow the run and print its report.")] = False,
    wait_for_workers: Annotated[
        bool, typer.Option(help="Let the run wait for regions without a live worker.")
    ] = False,
    output: Annotated[OutputFormat, typer.Option("--format", help="Report format.")] = (
        OutputFormat.table
    ),
) -> None:
    """Submit a scenario to a control plane; with --wait, follow it and print the report."""
    import httpx  # noqa: PLC0415

    from api.console import print_report  # noqa: PLC0415
    from api.submit import fetch_report, follow_run, submit_run  # noqa: PLC0415

    scenario = _load(scenario_path)
    headers = {"authorization": f"Bearer {token}"} if token else {}
    try:
        with httpx.Client(base_url=server, headers=headers, timeout=30) as client:
            run_id = submit_run(client, scenario, wait_for_workers)
            errors.print(f"run {run_id} submitted")
            if not wait:
                console.print(run_id)
                return
            view = follow_run(client, run_id, errors)
            print_report(console, fetch_report(client, run_id), output.value)
    except TokenbenchError as exc:
        raise exit_for(exc) from None
    except httpx.HTTPError as exc:
        raise exit_for(Unavailable(f"cannot reach {server}: {exc}")) from None
    if view.state != "finished":
        raise typer.Exit(1)


@app.command()
def validate(
    scenario_path: Annotated[Path, typer.Argument(help="Scenario file (YAML or JSON).")],
) -> None:
    """Check a scenario file; print its normalised form."""
    scenario = _load(scenario_path)
    console.print_json(scenario.model_dump_json(exclude_none=True))


@app.command()
def schema() -> None:
    """Print the scenario JSON Schema."""
    from scenarios.schema import scenario_json_schema  # noqa: PLC0415

    sys.stdout.write(json.dumps(scenario_json_schema(), indent=2) + "\n")


@app.command()
def worker(
    region: Annotated[str, typer.Option(help="Region whose queue to consume.")] = "local",
    concurrency: Annotated[int, typer.Option(help="Shards this worker runs at once.")] = 8,
    loglevel: Annotated[str, typer.Option(help="Celery log level.")] = "WARNING",
) -> None:
    """Run a regional worker (needs TOKENBENCH__REDIS__URL)."""
    from workers.worker_main import start_worker  # noqa: PLC0415

    start_worker(region, concurrency, loglevel)


app.command()(plan)
app.command()(report)
app.command()(sql)
app.command()(gateway)
app.add_typer(shadow_app, name="shadow")
app.command()(simulate)
app.add_typer(providers_app, name="providers")


def main() -> None:
    """Console-script entry point. An unexpected error is one line, not a traceback
    (``TOKENBENCH_DEBUG=1`` shows it)."""
    try:
        app()
    except Exception as exc:
        if os.environ.get("TOKENBENCH_DEBUG"):
            raise
        errors.print(f"[red]error: {type(exc).__name__}: {exc}", highlight=False)
        errors.print("(set TOKENBENCH_DEBUG=1 for the traceback)")
        sys.exit(1)
