"""``tokenbench run`` and ``tokenbench demo``: a scenario on the embedded default (a local
Redis and regional workers started for the run), or on the Redis the settings name."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import duckdb
import typer
import yaml
from celery import Celery
from redis.asyncio import Redis

from analytics.decide.verdict import ALL_FAILED
from analytics.report.build import build_report
from analytics.report.columns import ReportColumn
from analytics.store.db import connect
from api.cli.console import ColumnsOption, OutputFormat, WideOption, table_columns
from api.cli.errors import exit_for, load_or_exit
from api.cli.output import exit_on_verdict, write_report
from api.cli.signals import sigterm_as_interrupt
from api.cli.streams import stderr
from scenarios.adhoc import AdHocFlags, build_document, parse_list
from scenarios.errors import BadInput, Unavailable
from scenarios.loader import ScenarioError, load_document, validate_scenario
from scenarios.model import Scenario
from scenarios.settings import get_settings
from scenarios.wire.contract import REDIS_CLIENT_OPTIONS
from scenarios.workload.images import ImagesUnavailable, require_pillow
from workers.client.secrets import bindings_json, is_reserved, merge_bindings, owner_bindings

if TYPE_CHECKING:
    from api.control.cost_plan import CostPlan
    from api.control.spend import DryRun


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


def _check_extras(scenario: Scenario) -> None:
    """Local workers run on this machine: an optional library the scenario needs and this
    machine lacks is an error now, with the command that installs it."""
    if scenario.workload.images is not None:
        try:
            require_pillow()
        except ImagesUnavailable as exc:
            raise exit_for(exc) from None


Flag = typer.Option  # the ad-hoc flags, grouped in --help under one panel
_ADHOC = "Ad-hoc scenario (override the file, or replace it)"


def run(
    scenario_path: Annotated[
        Path | None, typer.Argument(help="Scenario file (YAML or JSON); optional with --target.")
    ] = None,
    target: Annotated[
        str | None,
        Flag(
            help="OpenAI-compatible server to measure, e.g. http://host:8000/v1.",
            rich_help_panel=_ADHOC,
        ),
    ] = None,
    model: Annotated[
        str | None, Flag(help="Model id sent in each request.", rich_help_panel=_ADHOC)
    ] = None,
    api_key_env: Annotated[
        str | None,
        Flag(
            help="Name of the variable holding the API key (never the key).", rich_help_panel=_ADHOC
        ),
    ] = None,
    concurrency: Annotated[
        str | None, Flag(help="Closed-loop levels, e.g. 1,8,64.", rich_help_panel=_ADHOC)
    ] = None,
    rate: Annotated[
        str | None, Flag(help="Open-loop rates (req/s), e.g. 2,5,10.", rich_help_panel=_ADHOC)
    ] = None,
    requests: Annotated[
        int | None, Flag(help="Requests per level.", rich_help_panel=_ADHOC)
    ] = None,
    duration: Annotated[
        float | None, Flag(help="Seconds per level.", rich_help_panel=_ADHOC)
    ] = None,
    prompt_tokens: Annotated[
        int | None, Flag(help="Prompt length (tokens, fixed).", rich_help_panel=_ADHOC)
    ] = None,
    output_tokens: Annotated[
        int | None, Flag(help="Answer length (max_tokens, fixed).", rich_help_panel=_ADHOC)
    ] = None,
    tokenizer: Annotated[
        str | None,
        Flag(
            help="Exact prompt lengths with this tokenizer: a local tokenizer.json or "
            "directory, else a Hugging Face hub name (docs/lengths.md).",
            rich_help_panel=_ADHOC,
        ),
    ] = None,
    name: Annotated[str | None, Flag(help="Scenario name.", rich_help_panel=_ADHOC)] = None,
    save: Annotated[
        Path | None,
        Flag(help="Also write the scenario that runs to this YAML file.", rich_help_panel=_ADHOC),
    ] = None,
    db: Annotated[Path | None, typer.Option(help="DuckDB file to append results to.")] = None,
    output: Annotated[OutputFormat, typer.Option("--format", help="Report format.")] = (
        OutputFormat.table
    ),
    out_file: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write the report to this file.")
    ] = None,
    max_error_rate: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=1.0,
            help="Exit 1 if a stage's error rate is above this fraction "
            "(default 1.0: only a stage in which every request failed).",
        ),
    ] = ALL_FAILED,
    columns: ColumnsOption = None,
    wide: WideOption = False,
    dry: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Print the plan, its cost bound and the budget (table, or --format json); "
            "start nothing.",
        ),
    ] = False,
) -> None:
    """Run a scenario: start what is missing (Redis, regional workers), print the report.

    Give a scenario file, or build one from flags (--target URL --model M ...); with both,
    the flags override the file. The report goes to stdout (or -o FILE), progress and
    notes to stderr. Exit 0: every stage measured; 1: the run failed, or a stage's error
    rate is above --max-error-rate; 2: bad input; 130: interrupted.
    """
    shown = table_columns(output, columns, wide)
    try:
        flags = AdHocFlags(
            target=target,
            model=model,
            api_key_env=api_key_env,
            concurrency=None
            if concurrency is None
            else parse_list(concurrency, "--concurrency", int),
            rate=None if rate is None else parse_list(rate, "--rate", float),
            requests=requests,
            duration_s=duration,
            prompt_tokens=prompt_tokens,
            output_tokens=output_tokens,
            name=name,
            tokenizer=None
            if tokenizer is None
            else {"path" if Path(tokenizer).exists() else "hub": tokenizer},
        )
    except BadInput as exc:
        raise exit_for(exc) from None
    scenario = _scenario(scenario_path, flags, save)
    if dry:
        _dry_run(scenario, db, output)
        return
    _run_scenario(scenario, db, output, out_file, max_error_rate, shown)


def _local_plan(scenario: Scenario, con: duckdb.DuckDBPyConnection) -> DryRun:
    """The local run's plan and cost bound (one worker process per region, as the local
    stack starts), the budget of the local user's team, and whether it admits the run."""
    from api.access.caller import LOCAL_OWNER  # noqa: PLC0415
    from api.access.teams import TeamStore  # noqa: PLC0415
    from api.control.cost_plan import plan_from_store  # noqa: PLC0415
    from api.control.spend import DryRun, OverBudget, check_budget, team_budget  # noqa: PLC0415

    settings = get_settings()
    try:
        plan = plan_from_store(
            con.cursor(),
            scenario,
            dict.fromkeys(scenario.regions, 1),
            settings.control.max_streams_per_shard,
        )
    except ScenarioError as exc:
        raise exit_for(exc, f"invalid scenario\n{exc}") from None
    budget = team_budget(con, TeamStore(con, settings.teams).policy(LOCAL_OWNER.team))
    try:
        check_budget(plan, budget)
    except OverBudget as exc:
        return DryRun(plan, budget, str(exc))
    return DryRun(plan, budget, None)


def _dry_run(scenario: Scenario, db: Path | None, output: OutputFormat) -> None:
    """Print the plan of a local run: nothing starts, no run is stored."""
    from api.cli.cost_output import print_dry_run  # noqa: PLC0415
    from api.cli.streams import stdout  # noqa: PLC0415

    settings = get_settings()
    con = connect(db or settings.duckdb.path, memory_limit=settings.duckdb.memory_limit)
    try:
        answer = _local_plan(_local_datasets(scenario, con), con)
    finally:
        con.close()
    print_dry_run(stdout, answer.to_json(), output == OutputFormat.json)


def _scenario(path: Path | None, flags: AdHocFlags, save: Path | None) -> Scenario:
    """The file's scenario, the flags' or both; written to ``save`` when asked."""
    if path is not None and not flags.any_given() and save is None:
        return load_or_exit(path)
    try:
        base, lines = (None, {}) if path is None else load_document(path)
        if base is not None and not isinstance(base, dict):
            base = {"": base}  # validation reports that a scenario must be a mapping
        document = build_document(base, flags)
        scenario = validate_scenario(document, None if path is None else str(path), lines)
    except ScenarioError as exc:
        raise exit_for(exc, f"invalid scenario\n{exc}") from None
    except BadInput as exc:
        raise exit_for(exc) from None
    if save is not None:
        try:
            save.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
        except OSError as exc:
            raise exit_for(BadInput(f"cannot write {save}: {exc.strerror}")) from None
        stderr.print(f"scenario written to {save}", highlight=False, soft_wrap=True)
    return scenario


DEMO_SCENARIO = "h100-vs-h200-405b.yaml"


def demo(
    db: Annotated[Path | None, typer.Option(help="DuckDB file to append results to.")] = None,
    output: Annotated[OutputFormat, typer.Option("--format", help="Report format.")] = (
        OutputFormat.table
    ),
    out_file: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write the report to this file.")
    ] = None,
    columns: ColumnsOption = None,
    wide: WideOption = False,
) -> None:
    """Run the shipped example: simulated 8×H100 FP8 vs 8×H200 FP16 405B vs a hosted API."""
    from importlib import resources  # noqa: PLC0415

    shown = table_columns(output, columns, wide)
    example = resources.files("scenarios").joinpath("examples", DEMO_SCENARIO)
    _run_scenario(load_or_exit(Path(str(example))), db, output, out_file, ALL_FAILED, shown)


def _run_scenario(
    scenario: Scenario,
    db: Path | None,
    output: OutputFormat,
    out_file: Path | None,
    max_error_rate: float,
    shown: tuple[ReportColumn, ...] | None = None,
) -> None:
    from api.local.embedded import local_stack  # noqa: PLC0415
    from api.local.upstreams import local_upstreams  # noqa: PLC0415
    from workers.runtime.celery_app import app as celery_app  # noqa: PLC0415

    settings = get_settings()
    secret_hosts = None
    if settings.redis.url is None:
        _check_keys(scenario)
        _check_extras(scenario)
        # The embedded default runs the user's own scenario on the user's own machine:
        # its workers may send each provider's key to that provider's own hosts.
        owned = merge_bindings(settings.worker.secret_hosts, owner_bindings(scenario.providers))
        secret_hosts = bindings_json(owned)
    sigterm_as_interrupt()  # stop like Ctrl-C: workers told, arrivals stored, cleanup
    db_path = db or settings.duckdb.path
    con = connect(db_path, memory_limit=settings.duckdb.memory_limit)
    scenario = _local_datasets(scenario, con)
    admission = _local_plan(scenario, con)
    if admission.refused is not None:
        from api.control.spend import OverBudget  # noqa: PLC0415

        con.close()
        raise exit_for(OverBudget(admission.refused, {}))
    stderr.print(f"[bold]tokenbench[/bold] · scenario {scenario.name} · results in {db_path}")
    try:
        with (
            local_upstreams(scenario.upstreams) as upstreams,
            local_stack(scenario.regions, settings.redis.url, secret_hosts) as redis_url,
        ):
            for upstream in upstreams:
                stderr.print(f"upstream {upstream.name} on {upstream.base_url}", highlight=False)
            os.environ["TOKENBENCH__REDIS__URL"] = redis_url
            get_settings.cache_clear()
            celery_app.conf.broker_url = redis_url
            state, run_id = asyncio.run(
                _drive(scenario, redis_url, con, celery_app, admission.plan)
            )
    except BadInput as exc:  # an upstream's port is taken
        raise exit_for(exc) from None
    except KeyboardInterrupt:
        stderr.print("[yellow]interrupted: partial results are stored, run marked cancelled")
        raise typer.Exit(130) from None
    except RuntimeError as exc:
        # The local stack could not start, or Redis stayed unreachable: operational.
        raise exit_for(Unavailable(str(exc))) from None
    report = build_report(con, run_id)
    con.close()
    write_report(report, output, out_file, shown)
    exit_on_verdict(state, report, max_error_rate)


def _local_datasets(scenario: Scenario, con: duckdb.DuckDBPyConnection) -> Scenario:
    """The user's own workload files stored as datasets in the local DuckDB file, so the
    run takes the same path as in a deployment (workers never read files)."""
    from analytics.datasets.uploads import DatasetStore  # noqa: PLC0415
    from api.cli.datasets import store_local_datasets  # noqa: PLC0415

    try:
        return store_local_datasets(scenario, DatasetStore(con), get_settings().api)
    except ScenarioError as exc:
        raise exit_for(exc, f"invalid scenario\n{exc}") from None


async def _drive(
    scenario: Scenario,
    redis_url: str,
    con: duckdb.DuckDBPyConnection,
    celery_app: Celery,
    plan: CostPlan | None = None,
) -> tuple[str, str]:
    from api.cli.console import StageProgress  # noqa: PLC0415
    from api.control.plane import ControlPlane  # noqa: PLC0415
    from api.control.run_views import live_view  # noqa: PLC0415
    from api.local.upstreams import UpstreamCollector  # noqa: PLC0415

    redis = Redis.from_url(redis_url, **REDIS_CLIENT_OPTIONS)
    from api.access.caller import LOCAL_OWNER  # noqa: PLC0415
    from api.control.spend import record_bound  # noqa: PLC0415

    settings = get_settings()
    plane = ControlPlane(redis, con, celery_app, settings.control, teams=settings.teams)
    collector: UpstreamCollector | None = None
    follower: asyncio.Task[None] | None = None
    try:
        with StageProgress(stderr) as progress:
            coordinator = await plane.submit(scenario)
            run_id = coordinator.run_id
            record_bound(con, run_id, LOCAL_OWNER.team, plan)
            if scenario.upstreams:
                # Its own cursor: its writes never join a transaction of the ingest's.
                collector = UpstreamCollector(scenario.upstreams, con.cursor(), run_id)
                follower = asyncio.create_task(collector.follow())
            try:
                while run_id in plane.runs:
                    await plane.step()
                    progress.update(live_view(coordinator, scenario.name))
            except (asyncio.CancelledError, KeyboardInterrupt):
                await plane.cancel(run_id)
                while run_id in plane.runs:  # store what arrives, then settle as cancelled
                    await plane.step()
                raise
            finally:
                if collector is not None:
                    await collector.finish(follower)
                    for failure in collector.failures[:5]:
                        stderr.print(f"[yellow]{failure}", highlight=False)
        return plane.store_state(run_id), run_id
    finally:
        await redis.aclose()
