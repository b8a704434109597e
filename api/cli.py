"""The ``tokenbench`` command line.

Exit codes: 0 success, 1 a run that ended failed or an operational error, 2 bad input
(scenario, options), 130 interrupted.
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
from analytics.report import UnknownRunError, build_report, latest_run_id
from api.plan import plan
from scenarios.loader import ScenarioError, load_scenario
from scenarios.model import Scenario, SimulateSpec
from scenarios.settings import get_settings

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
        errors.print(f"[red]invalid scenario[/red]\n{exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


def _check_keys(scenario: Scenario) -> None:
    """Local workers inherit this environment: a missing key variable is an error now."""
    for provider in scenario.providers:
        for variable in provider.secret_env_vars():
            if not os.environ.get(variable):
                errors.print(
                    f"[red]provider {provider.name!r}: environment variable {variable} is not set"
                )
                raise typer.Exit(2)


@app.command()
def run(
    scenario_path: Annotated[Path, typer.Argument(help="Scenario file (YAML or JSON).")],
    db: Annotated[Path | None, typer.Option(help="DuckDB file to append results to.")] = None,
    output: Annotated[OutputFormat, typer.Option("--format", help="Report format.")] = (
        OutputFormat.table
    ),
) -> None:
    """Run a scenario: start what is missing (Redis, regional workers), print the report."""
    from api.embedded import local_stack  # noqa: PLC0415
    from workers.celery_app import app as celery_app  # noqa: PLC0415

    scenario = _load(scenario_path)
    settings = get_settings()
    if settings.redis.url is None:
        _check_keys(scenario)
    _interrupt_on_sigterm()
    db_path = db or settings.duckdb.path
    con = connect(db_path)
    console.print(f"[bold]tokenbench[/bold] · scenario {scenario.name} · results in {db_path}")
    try:
        with local_stack(scenario.regions, settings.redis.url) as redis_url:
            os.environ["TOKENBENCH__REDIS__URL"] = redis_url
            get_settings.cache_clear()
            celery_app.conf.broker_url = redis_url
            state, run_id = asyncio.run(_drive(scenario, redis_url, con, celery_app))
    except KeyboardInterrupt:
        errors.print("[yellow]interrupted: partial results are stored, run marked cancelled")
        raise typer.Exit(130) from None
    except RuntimeError as exc:
        errors.print(f"[red]{exc}")
        raise typer.Exit(1) from None
    from api.console import print_report  # noqa: PLC0415

    print_report(console, build_report(con, run_id), output.value)
    con.close()
    if state != "finished":
        raise typer.Exit(1)


def _interrupt_on_sigterm() -> None:
    """SIGTERM (and SIGINT, even when inherited as ignored) stop a run like Ctrl-C does:
    workers are told to stop, what arrived is stored, local processes are cleaned up."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: signal.raise_signal(signal.SIGINT))


async def _drive(
    scenario: Scenario, redis_url: str, con: duckdb.DuckDBPyConnection, celery_app: Celery
) -> tuple[str, str]:
    from api.console import StageProgress  # noqa: PLC0415
    from api.coordinator import RunCoordinator  # noqa: PLC0415

    redis = Redis.from_url(redis_url)
    try:
        with StageProgress(console) as progress:
            coordinator = RunCoordinator(
                scenario,
                redis,
                con,
                celery_app,
                on_progress=progress.update,
            )
            state = await coordinator.execute()
        return state, coordinator.run_id
    finally:
        await redis.aclose()


@app.command()
def report(
    run_id: Annotated[str, typer.Argument(help="Run id, or 'latest'.")] = "latest",
    db: Annotated[Path | None, typer.Option(help="DuckDB file.")] = None,
    output: Annotated[OutputFormat, typer.Option("--format", help="Report format.")] = (
        OutputFormat.table
    ),
) -> None:
    """Print a stored run's report again."""
    from api.console import print_report  # noqa: PLC0415

    path = db or get_settings().duckdb.path
    try:
        con = connect(path, read_only=True)
    except FileNotFoundError as exc:
        errors.print(f"[red]{exc}")
        raise typer.Exit(2) from None
    except duckdb.IOException as exc:
        # DuckDB allows one writer process: a run in progress holds the file.
        errors.print(f"[red]cannot open {path}: {str(exc).splitlines()[0]}")
        raise typer.Exit(1) from None
    chosen = latest_run_id(con) if run_id == "latest" else run_id
    if chosen is None:
        errors.print(f"[red]no runs in {path}")
        raise typer.Exit(2)
    try:
        print_report(console, build_report(con, chosen), output.value)
    except UnknownRunError:
        errors.print(f"[red]no run {chosen!r} in {path}")
        raise typer.Exit(2) from None


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
def simulate(
    port: Annotated[int, typer.Option(help="Port (0 picks a free one).")] = 8000,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    ttft_ms: Annotated[float, typer.Option(help="Time to first token.")] = 100.0,
    itl_ms: Annotated[float, typer.Option(help="Time per output token.")] = 10.0,
    tokens_per_chunk: Annotated[int, typer.Option(help="Tokens per SSE event.")] = 1,
    error_rate: Annotated[float, typer.Option(help="Share of requests failed.")] = 0.0,
    error_status: Annotated[int, typer.Option(help="HTTP status of failures.")] = 500,
    model: Annotated[str, typer.Option(help="Model id to report.")] = "simulated",
) -> None:
    """Serve a simulated OpenAI-compatible streaming endpoint with fixed latencies."""
    from pydantic import ValidationError  # noqa: PLC0415

    from workers.simulator.process import run as run_simulator  # noqa: PLC0415

    try:
        spec = SimulateSpec(
            ttft_ms=ttft_ms,
            itl_ms=itl_ms,
            tokens_per_chunk=tokens_per_chunk,
            error_rate=error_rate,
            error_status=error_status,
        )
    except ValidationError as exc:
        errors.print(f"[red]{exc}")
        raise typer.Exit(2) from None
    errors.print(f"simulated endpoint on http://{host}:{port}/v1 (Ctrl-C stops)")
    run_simulator(spec, model, host, port, parent_pid=None)


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


def main() -> None:
    """Console-script entry point."""
    app()
