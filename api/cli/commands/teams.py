"""``tokenbench teams list|show|set``: teams and their settings on a control plane.

Each figure (visibility, monthly budget, quotas) is the team's own, set by an admin with
``teams set``, or the service's default (its ``teams`` setting); ``show`` and ``list``
say which. ``set --reset NAME`` returns a figure to the default. Talks to ``--server``
with ``--token`` over REST (docs/teams.md); exit codes as ``tokenbench tokens``.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from analytics.render.fitted_tables import Column, fit, print_tables
from api.cli.commands.tokens import (
    DEFAULT_SERVER,
    Format,
    FormatOption,
    ServerArg,
    note,
    out,
    print_json,
    print_lines,
)
from api.cli.errors import exit_for
from api.cli.rest_client import TokenOption, get_json, raise_for, remote
from scenarios.errors import BadInput

teams_app = typer.Typer(
    help="Teams and their settings: visibility, monthly budget, quotas.",
    no_args_is_help=True,
)

# The settings in the order shown, with their table headers.
SETTINGS = {
    "visibility": "visibility",
    "monthly_budget_usd": "budget\nUSD/month",
    "max_concurrent_runs": "concurrent\nruns",
    "max_queued_runs": "queued\nruns",
    "max_schedules": "schedules",
    "max_dataset_bytes": "dataset\nbytes",
}


def _figure(figure: dict[str, Any], mark: bool = True) -> str:
    value = figure["value"]
    if value is None:
        text = "unlimited"
    else:
        text = f"{value:g}" if isinstance(value, float) else str(value)
    return text + ("*" if mark and figure["source"] == "team" else "")


def _print_teams(teams: list[dict[str, Any]]) -> None:
    console = out()
    tables = fit(
        "teams (* set for the team; the rest are the defaults)",
        [Column("team", [t["team"] for t in teams], numeric=False)],
        [
            Column(header, [_figure(t["settings"][name]) for t in teams])
            for name, header in SETTINGS.items()
        ],
        console.width,
    )
    print_tables(console, tables)


def _print_team(team: dict[str, Any]) -> None:
    figures = {name: team["settings"][name] for name in SETTINGS}
    shown = {name: _figure(figure, mark=False) for name, figure in figures.items()}
    width = max(len(text) for text in shown.values())
    lines = [("team", team["team"])]
    for name, figure in figures.items():
        source = "set for the team" if figure["source"] == "team" else "default"
        lines.append((name, f"{shown[name]:<{width}}  {source}"))
    print_lines(lines)
    example = figures["max_schedules"]["default_setting"]
    note(
        f"a default is the service's setting of the same name ({example} for "
        "max_schedules); tokenbench teams set --reset NAME returns a figure to it"
    )


def _show(data: Any, output: Format) -> None:
    if output is Format.json:
        print_json(data)
    elif isinstance(data, list):
        _print_teams(data)
    else:
        _print_team(data)


@teams_app.command("list")
def list_teams(
    server: ServerArg = DEFAULT_SERVER,
    token: TokenOption = None,
    output: FormatOption = Format.table,
) -> None:
    """Every team and its settings (an admin), or your own team."""
    with remote(server, token) as client:
        _show(get_json(client, "/v1/teams"), output)


@teams_app.command("show")
def show(
    team: Annotated[str, typer.Argument(help="Team name.")],
    server: ServerArg = DEFAULT_SERVER,
    token: TokenOption = None,
    output: FormatOption = Format.table,
) -> None:
    """A team's settings, each with where it comes from."""
    with remote(server, token) as client:
        _show(get_json(client, f"/v1/teams/{team}"), output)


@teams_app.command("set")
def set_team(
    team: Annotated[str, typer.Argument(help="Team name.")],
    visibility: Annotated[
        str | None, typer.Option(help="org (every token reads its results) or team.")
    ] = None,
    monthly_budget_usd: Annotated[
        float | None, typer.Option(min=0, help="Spend per calendar month (UTC), USD.")
    ] = None,
    max_concurrent_runs: Annotated[int | None, typer.Option(min=1, help="Runs at once.")] = None,
    max_queued_runs: Annotated[int | None, typer.Option(min=0, help="Runs waiting.")] = None,
    max_schedules: Annotated[int | None, typer.Option(min=0, help="Active schedules.")] = None,
    max_dataset_bytes: Annotated[
        int | None, typer.Option(min=0, help="Bytes of uploaded datasets kept.")
    ] = None,
    reset: Annotated[
        list[str] | None,
        typer.Option(help="Return a setting to the default (repeatable), e.g. monthly-budget-usd."),
    ] = None,
    server: ServerArg = DEFAULT_SERVER,
    token: TokenOption = None,
    output: FormatOption = Format.table,
) -> None:
    """Set or reset a team's settings (admins)."""
    given = {
        "visibility": visibility,
        "monthly_budget_usd": monthly_budget_usd,
        "max_concurrent_runs": max_concurrent_runs,
        "max_queued_runs": max_queued_runs,
        "max_schedules": max_schedules,
        "max_dataset_bytes": max_dataset_bytes,
    }
    body: dict[str, Any] = {name: value for name, value in given.items() if value is not None}
    for name in reset or []:
        key = name.replace("-", "_")
        if key not in SETTINGS:
            raise exit_for(BadInput(f"--reset {name}: one of {', '.join(SETTINGS)}"))
        if key in body:
            raise exit_for(BadInput(f"--reset {name} and a value for it: give one"))
        body[key] = None
    if not body:
        raise exit_for(BadInput("nothing to set: give a setting's option or --reset NAME"))
    with remote(server, token) as client:
        response = client.patch(f"/v1/teams/{team}", json=body)
        raise_for(response, f"team {team}: ")
        _show(response.json(), output)
    note(f"team {team}: {', '.join(sorted(body))} changed")
