"""``tokenbench submit``: send a scenario to a control plane over REST and follow the run."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from rich.console import Console

from analytics.report import RunReport
from api.cli.console import OutputFormat, StageProgress, stderr, stdout
from api.cli.datasets import upload_local_datasets
from api.cli.errors import error_for_status, exit_for, load_or_exit
from api.schemas import RunPublic
from scenarios.errors import BadInput, TokenbenchError, Unavailable
from scenarios.model import Scenario
from scenarios.settings import get_settings
from scenarios.wire import RunState

POLL_S = 0.5


def _raise_for(response: httpx.Response, context: str = "") -> None:
    """Raise the error of the tree for an HTTP error answer (its message prefixed by
    ``context``); exit codes as for any CLI error (api/cli/errors.py)."""
    if response.status_code < 400:
        return
    try:
        body: Any = response.json()
    except ValueError:
        body = {"detail": response.text[:500]}
    detail = body.get("detail") if isinstance(body, dict) else body
    if isinstance(detail, list):
        lines = [
            ".".join(str(p) for p in item.get("loc", [])) + f": {item.get('msg')}"
            for item in detail
        ]
        message = "\n".join(lines)
    else:
        message = str(detail)
    status = response.status_code
    raise error_for_status(status, f"{context}HTTP {status}: {message}")


def upload_dataset(client: httpx.Client, use: str, path: str, data: bytes) -> str:
    """POST one local workload file as a dataset; return its id (an error of the tree
    naming the file when the control plane refuses it)."""
    response = client.post(
        "/v1/datasets", content=data, headers={"content-type": "application/x-ndjson"}
    )
    _raise_for(response, f"workload.{use}.path: {path}: ")
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
) -> str:
    """Upload the local files the scenario names as datasets (the control plane never
    reads a path), POST the scenario inline; return the run id. A local file that cannot
    be used raises its ScenarioError (bad input)."""
    scenario = upload_local_datasets(
        scenario,
        lambda use, path, data: upload_dataset(client, use, path, data),
        get_settings().api,
        source,
    )
    response = client.post(
        "/v1/runs",
        json={"scenario": scenario.model_dump(mode="json"), "wait_for_workers": wait_for_workers},
    )
    _raise_for(response)
    return str(response.json()["id"])


def follow_run(client: httpx.Client, run_id: str, console: Console) -> RunPublic:
    """Poll the run with a progress bar per stage until it ends; return its last view."""
    with StageProgress(console) as progress:
        while True:
            response = client.get(f"/v1/runs/{run_id}")
            _raise_for(response)
            view = RunPublic.model_validate(response.json())
            progress.update(view)
            if view.state != RunState.RUNNING:
                return view
            time.sleep(POLL_S)


def fetch_report(client: httpx.Client, run_id: str) -> RunReport:
    """The run's report from the control plane."""
    response = client.get(f"/v1/runs/{run_id}/report")
    _raise_for(response)
    data = response.json()
    names = {f.name for f in dataclasses.fields(RunReport)}
    return RunReport(**{key: value for key, value in data.items() if key in names})


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
    from api.cli.console import print_report  # noqa: PLC0415

    scenario = load_or_exit(scenario_path)
    headers = {"authorization": f"Bearer {token}"} if token else {}
    try:
        with httpx.Client(base_url=server, headers=headers, timeout=30) as client:
            run_id = submit_run(client, scenario, wait_for_workers)
            stderr.print(f"run {run_id} submitted")
            if not wait:
                stdout.print(run_id)
                return
            view = follow_run(client, run_id, stderr)
            print_report(stdout, fetch_report(client, run_id), output.value)
    except TokenbenchError as exc:
        raise exit_for(exc) from None
    except httpx.HTTPError as exc:
        raise exit_for(Unavailable(f"cannot reach {server}: {exc}")) from None
    if view.state != RunState.FINISHED:
        raise typer.Exit(1)
