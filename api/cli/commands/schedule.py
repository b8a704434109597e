"""``tokenbench schedule create|list|show|delete|pause|resume``: schedules on a control plane.

Every subcommand talks to ``--server`` (``TOKENBENCH_SERVER``) over REST: schedules live in
the control plane, which fires them (docs/tracking.md). ``create --scenario`` takes a
stored scenario's id, or a scenario file, which is stored first (its local workload
files uploaded as datasets, as ``submit`` does). ``--json`` prints the API's answer.
Exit codes as everywhere: 2 for bad input (a cron expression the control plane refuses,
an unknown schedule), 1 when the control plane cannot be reached.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from rich.console import Console

from analytics.render.fitted_tables import Column, fit, print_tables
from analytics.trends.regression import DEFAULT_MIN_CHANGE, DEFAULT_WINDOW
from api.cli.commands.submit import region_list, upload_dataset
from api.cli.datasets import upload_local_datasets
from api.cli.errors import exit_for, load_or_exit
from api.cli.rest_client import TokenOption, get_json, raise_for, remote
from api.cli.streams import console_width
from scenarios.errors import BadInput
from scenarios.limits import MAX_MIN_CHANGE, MAX_TREND_WINDOW
from scenarios.security.redaction import public_url
from scenarios.settings import get_settings

schedule_app = typer.Typer(
    help="Run a stored scenario on a cron expression; follow its runs and regressions.",
    no_args_is_help=True,
)

ServerArg = Annotated[str, typer.Option(envvar="TOKENBENCH_SERVER", help="Control plane URL.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the API's JSON answer.")]
DEFAULT_SERVER = "http://127.0.0.1:8080"


def _out() -> Console:
    return Console(width=console_width())


def _print_json(data: Any) -> None:
    _out().file.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def store_scenario(client: httpx.Client, path: Path) -> str:
    """Store the scenario file ``path`` (its local files uploaded as datasets); its id."""
    scenario = load_or_exit(path)
    scenario = upload_local_datasets(
        scenario,
        functools.partial(upload_dataset, client),
        get_settings().api,
        str(path),
    )
    response = client.post(
        "/v1/scenarios",
        content=scenario.model_dump_json(),
        headers={"content-type": "application/json"},
    )
    raise_for(response, f"{path}: ")
    return str(response.json()["id"])


def _when(value: Any) -> str:
    return "–" if not value else str(value)[:19].replace("T", " ")


def _last_fire(schedule: dict[str, Any]) -> str:
    fire = schedule.get("last_fire")
    if not fire:
        return "–"
    run = f" {fire['run_id']}" if fire.get("run_id") else ""
    return f"{fire['outcome']}{run}"


def _print_list(schedules: list[dict[str, Any]]) -> None:
    out = _out()
    if not schedules:
        out.print("no schedules", highlight=False)
        return
    tables = fit(
        "schedules",
        [Column("id", [s["id"] for s in schedules], numeric=False)],
        [
            Column("name", [s["name"] or "–" for s in schedules], numeric=False),
            Column("state", [s["state"] for s in schedules], numeric=False),
            Column("cron", [f"{s['cron']} ({s['timezone']})" for s in schedules], numeric=False),
            Column("scenario", [s["scenario_id"] for s in schedules], numeric=False),
            Column("next fire (UTC)", [_when(s["next_fire_at"]) for s in schedules], numeric=False),
            Column("last fire", [_last_fire(s) for s in schedules], numeric=False, wraps=True),
        ],
        out.width,
    )
    print_tables(out, tables)


def _print_show(schedule: dict[str, Any], fires: list[dict[str, Any]]) -> None:
    out = _out()
    lines = [
        f"schedule {schedule['id']}" + (f" ({schedule['name']})" if schedule["name"] else ""),
        f"  state      {schedule['state']}",
        f"  cron       {schedule['cron']} ({schedule['timezone']})",
        f"  scenario   {schedule['scenario_id']}",
        f"  next fire  {_when(schedule['next_fire_at'])} UTC",
        f"  verdict    latest vs {schedule['trend_window']} earlier runs, "
        f"changes from {100 * schedule['min_change']:g} %",
        f"  webhook    {public_url(schedule['webhook_url']) if schedule['webhook_url'] else '–'}",
    ]
    webhook = schedule.get("last_webhook")
    if webhook:
        status = f", HTTP {webhook['status']}" if webhook.get("status") else ""
        note = f": {webhook['message']}" if webhook.get("message") else ""
        tries = f"{webhook['attempts']} {'try' if webhook['attempts'] == 1 else 'tries'}"
        lines.append(
            f"  notified   {webhook['outcome']} for run {webhook['run_id']} ({tries}{status}){note}"
        )
    for line in lines:
        out.print(line, highlight=False, markup=False, soft_wrap=True)
    if not fires:
        out.print("no fires yet", highlight=False)
        return

    def flagged(fire: dict[str, Any]) -> str:
        if fire.get("regressions") is None:
            return "–" if fire["outcome"] != "started" else "pending"
        return (
            ", ".join(f"{r['provider']}/{r['region']} {r['title']}" for r in fire["regressions"])
            or "none"
        )

    tables = fit(
        "fires, newest first",
        [Column("#", [str(f["seq"]) for f in fires])],
        [
            Column("scheduled for", [_when(f["scheduled_for"]) for f in fires], numeric=False),
            Column("kind", [f["kind"] for f in fires], numeric=False),
            Column("outcome", [f["outcome"] for f in fires], numeric=False),
            Column("run", [f["run_id"] or "–" for f in fires], numeric=False),
            Column("run state", [f["run_state"] or "–" for f in fires], numeric=False),
            Column("regressions", [flagged(f) for f in fires], numeric=False, wraps=True),
            Column("message", [f["message"] or "" for f in fires], numeric=False, wraps=True),
        ],
        out.width,
    )
    print_tables(out, tables)


@schedule_app.command("create")
def create(
    scenario: Annotated[
        str, typer.Option(help="Stored scenario id, or a scenario file (stored first).")
    ],
    cron: Annotated[
        str,
        typer.Option(
            help="Crontab expression, e.g. '0 * * * *' (hourly); 0 and 7 are Sunday; "
            "six fields: seconds first."
        ),
    ],
    timezone: Annotated[str, typer.Option(help="IANA time zone of the expression.")] = "UTC",
    name: Annotated[str | None, typer.Option(help="A label.")] = None,
    webhook: Annotated[
        str | None, typer.Option(help="URL POSTed a small JSON when a run regresses.")
    ] = None,
    window: Annotated[
        int,
        typer.Option(
            min=1, max=MAX_TREND_WINDOW, help="Earlier runs the latest is judged against."
        ),
    ] = DEFAULT_WINDOW,
    min_change: Annotated[
        float, typer.Option(min=0, max=MAX_MIN_CHANGE, help="Smallest relative change that counts.")
    ] = DEFAULT_MIN_CHANGE,
    regions: Annotated[
        str | None, typer.Option(help="Run from these regions (us,eu) instead of the scenario's.")
    ] = None,
    wait_for_workers: Annotated[
        bool, typer.Option(help="A fire waits for regions without a live worker (else fails).")
    ] = False,
    server: ServerArg = DEFAULT_SERVER,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a schedule; prints its id."""
    try:
        chosen = None if regions is None else region_list(regions)
    except BadInput as exc:
        raise exit_for(exc) from None
    with remote(server, token) as client:
        scenario_id = (
            store_scenario(client, Path(scenario)) if Path(scenario).is_file() else scenario
        )
        body: dict[str, Any] = {
            "scenario_id": scenario_id,
            "cron": cron,
            "timezone": timezone,
            "name": name,
            "webhook_url": webhook,
            "trend_window": window,
            "min_change": min_change,
            "wait_for_workers": wait_for_workers,
        }
        if chosen is not None:
            body["overrides"] = {"regions": chosen}
        response = client.post("/v1/schedules", json=body)
        raise_for(response)
        created = response.json()
    if as_json:
        _print_json(created)
        return
    Console(stderr=True).print(
        f"schedule {created['id']} of scenario {scenario_id}: next fire "
        f"{_when(created['next_fire_at'])} UTC",
        highlight=False,
    )
    _out().print(created["id"], highlight=False)


@schedule_app.command("list")
def list_schedules(
    server: ServerArg = DEFAULT_SERVER, token: TokenOption = None, as_json: JsonOption = False
) -> None:
    """List the active and paused schedules."""
    with remote(server, token) as client:
        schedules = get_json(client, "/v1/schedules")
    if as_json:
        _print_json(schedules)
    else:
        _print_list(schedules)


@schedule_app.command("show")
def show(
    schedule_id: Annotated[str, typer.Argument(help="Schedule id.")],
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Fires shown.")] = 20,
    server: ServerArg = DEFAULT_SERVER,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """A schedule, its last webhook notification and its recent fires."""
    with remote(server, token) as client:
        schedule = get_json(client, f"/v1/schedules/{schedule_id}")
        fires = get_json(client, f"/v1/schedules/{schedule_id}/runs", {"limit": limit})
    if as_json:
        _print_json({**schedule, "fires": fires})
    else:
        _print_show(schedule, fires)


def _act(server: str, token: str | None, method: str, path: str) -> dict[str, Any] | None:
    with remote(server, token) as client:
        response = client.request(method, path)
        raise_for(response)
        return None if response.status_code == 204 else dict(response.json())


@schedule_app.command("delete")
def delete(
    schedule_id: Annotated[str, typer.Argument(help="Schedule id.")],
    server: ServerArg = DEFAULT_SERVER,
    token: TokenOption = None,
) -> None:
    """Delete a schedule (its runs stay, and its trend)."""
    _act(server, token, "DELETE", f"/v1/schedules/{schedule_id}")
    Console(stderr=True).print(f"schedule {schedule_id} deleted", highlight=False)


@schedule_app.command("pause")
def pause(
    schedule_id: Annotated[str, typer.Argument(help="Schedule id.")],
    server: ServerArg = DEFAULT_SERVER,
    token: TokenOption = None,
) -> None:
    """Stop firing until resumed."""
    _act(server, token, "POST", f"/v1/schedules/{schedule_id}/pause")
    Console(stderr=True).print(f"schedule {schedule_id} paused", highlight=False)


@schedule_app.command("resume")
def resume(
    schedule_id: Annotated[str, typer.Argument(help="Schedule id.")],
    server: ServerArg = DEFAULT_SERVER,
    token: TokenOption = None,
) -> None:
    """Fire again from the next time the expression names."""
    answer = _act(server, token, "POST", f"/v1/schedules/{schedule_id}/resume") or {}
    Console(stderr=True).print(
        f"schedule {schedule_id} resumed: next fire {_when(answer.get('next_fire_at'))} UTC",
        highlight=False,
    )
