"""``tokenbench submit``: send a scenario to a control plane over REST and follow the run."""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from rich.console import Console

from api.cli.console import ColumnsOption, OutputFormat, StageProgress, WideOption, table_columns
from api.cli.cost_output import print_dry_run
from api.cli.datasets import upload_local_datasets
from api.cli.errors import exit_for, load_or_exit
from api.cli.rest_client import TokenOption, fetch_report, raise_for, remote
from api.cli.streams import stderr, stdout
from api.schemas import RunPublic
from scenarios.datasets.formats import Conversion
from scenarios.errors import BadInput
from scenarios.limits import MAX_ID_CHARS
from scenarios.model import Scenario
from scenarios.settings import get_settings
from scenarios.wire.contract import RunState

POLL_S = 0.5


def upload_dataset(
    client: httpx.Client,
    use: str,
    path: str,
    data: bytes,
    conversion: Conversion | None = None,
    origin: str | None = None,
) -> str:
    """POST one local workload file as a dataset (``workload.dataset``'s with the format
    and columns it is converted with, by the control plane); return its id (an error of
    the tree naming the file when the control plane refuses it)."""
    if use == "dataset":
        params = {f"{role}_column": column for role, column in (conversion or Conversion()).columns}
        params["format"] = (conversion or Conversion()).format
        params["name"] = (origin or path)[:MAX_ID_CHARS]
        response = client.post(
            "/v1/datasets",
            content=data,
            params=params,
            headers={"content-type": "application/octet-stream"},
        )
        field = "hub" if (origin or "").startswith("hub:") else "path"
        raise_for(response, f"workload.dataset.{field}: {origin or path}: ")
        info = response.json()
        if "prompts" not in info["kinds"]:
            raise BadInput(f"workload.dataset.{field}: {path} holds no prompts")
        return str(info["id"])
    response = client.post(
        "/v1/datasets", content=data, headers={"content-type": "application/x-ndjson"}
    )
    raise_for(response, f"workload.{use}.path: {path}: ")
    info = response.json()
    if use not in info["kinds"]:
        raise BadInput(
            f"workload.{use}.path: {path} cannot be replayed (every line needs timestamp "
            f"and max_tokens): {info.get('replay_problem')}"
        )
    return str(info["id"])


def submit_run(
    client: httpx.Client,
    scenario: Scenario,
    wait_for_workers: bool,
    source: str | None = None,
    regions: list[str] | None = None,
) -> str:
    """Upload the local files the scenario names as datasets (the control plane never
    reads a path), POST the scenario inline (run from ``regions`` instead of its own
    when given); return the run id. A local file that cannot be used raises its
    ScenarioError (bad input)."""
    response = client.post(
        "/v1/runs", json=run_body(client, scenario, wait_for_workers, source, regions)
    )
    raise_for(response)
    return str(response.json()["id"])


def dry_run(
    client: httpx.Client,
    scenario: Scenario,
    wait_for_workers: bool,
    regions: list[str] | None = None,
) -> dict[str, Any]:
    """``POST /v1/runs?dry_run=true``: the plan, its cost bound and the team's budget;
    no run is created (the local files are uploaded as datasets, as their lengths bound
    the cost)."""
    body = run_body(client, scenario, wait_for_workers, None, regions)
    response = client.post("/v1/runs", json=body, params={"dry_run": "true"})
    raise_for(response)
    answer: dict[str, Any] = response.json()
    return answer


def run_body(
    client: httpx.Client,
    scenario: Scenario,
    wait_for_workers: bool,
    source: str | None = None,
    regions: list[str] | None = None,
) -> dict[str, Any]:
    """The body of ``POST /v1/runs`` for ``scenario``, its local files uploaded."""
    scenario = upload_local_datasets(
        scenario,
        functools.partial(upload_dataset, client),
        get_settings().api,
        source,
    )
    body: dict[str, Any] = {
        "scenario": scenario.model_dump(mode="json"),
        "wait_for_workers": wait_for_workers,
    }
    if regions is not None:
        # The control plane's per-run override: it validates the names like the scenario's.
        body["overrides"] = {"regions": regions}
    return body


def follow_run(client: httpx.Client, run_id: str, console: Console) -> RunPublic:
    """Poll the run with a progress bar per stage until it ends; return its last view.
    While it is queued (docs/teams.md), a line says its place and what it waits for,
    again whenever that changes."""
    said = ""
    with StageProgress(console) as progress:
        while True:
            response = client.get(f"/v1/runs/{run_id}")
            raise_for(response)
            view = RunPublic.model_validate(response.json())
            line = queued_line(view)
            if line and line != said:
                progress.progress.console.print(line)
            said = line
            progress.update(view)
            if view.state not in (RunState.RUNNING, RunState.QUEUED):
                return view
            time.sleep(POLL_S)


def queued_line(view: RunPublic) -> str:
    """``run X queued: position 1, waiting for run Y (its target is in use ...)``; "" for
    a run that is not queued."""
    if view.state != RunState.QUEUED or view.queue is None:
        return ""
    waits = ", ".join(view.queue.waiting_for) or "nothing (starting)"
    return (
        f"run {view.id} queued: position {view.queue.position}, waiting for {waits} "
        f"({view.queue.reason})"
    )


def region_list(text: str) -> list[str]:
    """``us,eu`` as a list of names; none at all is bad input."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise BadInput("--regions takes one or more names, e.g. --regions us,eu")
    return names


def submit(
    scenario_path: Annotated[Path, typer.Argument(help="Scenario file (YAML or JSON).")],
    server: Annotated[
        str, typer.Option(envvar="TOKENBENCH_SERVER", help="Control plane URL.")
    ] = "http://127.0.0.1:8080",
    token: TokenOption = None,
    regions: Annotated[
        str | None,
        typer.Option(help="Run from these regions (us,eu) instead of the scenario's."),
    ] = None,
    wait: Annotated[bool, typer.Option(help="Follow the run and print its report.")] = False,
    wait_for_workers: Annotated[
        bool, typer.Option(help="Let the run wait for regions without a live worker.")
    ] = False,
    output: Annotated[OutputFormat, typer.Option("--format", help="Report format.")] = (
        OutputFormat.table
    ),
    columns: ColumnsOption = None,
    wide: WideOption = False,
    dry: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Print the plan, its cost bound and the team's budget; start nothing.",
        ),
    ] = False,
) -> None:
    """Submit a scenario to a control plane; with --wait, follow it and print the report;
    with --dry-run, print what the run would be and cost (docs/teams.md)."""
    from api.cli.console import print_report  # noqa: PLC0415

    shown = table_columns(output, columns, wide)
    scenario = load_or_exit(scenario_path)
    try:
        chosen = None if regions is None else region_list(regions)
    except BadInput as exc:
        raise exit_for(exc) from None
    with remote(server, token) as client:
        if dry:
            answer = dry_run(client, scenario, wait_for_workers, chosen)
            print_dry_run(stdout, answer, output == OutputFormat.json)
            return
        run_id = submit_run(client, scenario, wait_for_workers, regions=chosen)
        stderr.print(f"run {run_id} submitted")
        if not wait:
            stdout.print(run_id)
            return
        view = follow_run(client, run_id, stderr)
        print_report(stdout, fetch_report(client, run_id), output.value, shown)
    if view.state != RunState.FINISHED:
        raise typer.Exit(1)
