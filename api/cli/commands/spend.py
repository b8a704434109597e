"""``tokenbench spend``: what a team spent on token-priced providers, per provider, day
or run, from the spend ledger of a control plane (``--server``) or a local DuckDB file
(``--db``); docs/teams.md, "Budgets and the spend ledger"."""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from api.cli.cost_output import print_spend
from api.cli.errors import exit_for
from api.cli.local_db import open_read_only
from api.cli.rest_client import ServerOption, TokenOption, get_json, one_source, remote
from api.cli.streams import stdout
from scenarios.errors import BadInput
from scenarios.settings import get_settings


class SpendGroup(StrEnum):
    """What the ledger is summed per."""

    provider = "provider"
    day = "day"
    run = "run"


class SpendFormat(StrEnum):
    """How the ledger is printed."""

    table = "table"
    json = "json"


def _day(text: str | None, option: str) -> dt.date | None:
    if text is None:
        return None
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise exit_for(BadInput(f"{option}: a day as YYYY-MM-DD, not {text!r}")) from None


def spend(
    team: Annotated[
        str | None, typer.Option(help="Team (default: the token's; admins: any).")
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="First UTC day, YYYY-MM-DD (default: this month's first).")
    ] = None,
    until: Annotated[
        str | None, typer.Option(help="Last UTC day, YYYY-MM-DD (default: today).")
    ] = None,
    group: Annotated[SpendGroup, typer.Option(help="Sum per provider, day or run.")] = (
        SpendGroup.provider
    ),
    server: ServerOption = None,
    token: TokenOption = None,
    db: Annotated[Path | None, typer.Option(help="Local DuckDB file to read.")] = None,
    output: Annotated[SpendFormat, typer.Option("--format", help="Output format.")] = (
        SpendFormat.table
    ),
) -> None:
    """Print the spend ledger: USD spent on token-priced providers (recorded usage × list
    price), per provider, day or run, and the team's monthly budget."""
    one_source(server, db)
    first, last = _day(since, "--since"), _day(until, "--until")
    if server is not None:
        params = {
            "team": team,
            "since": since,
            "until": until,
            "group": group.value,
        }
        with remote(server, token) as client:
            answer: dict[str, Any] = get_json(client, "/v1/spend", params)
    else:
        answer = _local(db or get_settings().duckdb.path, team, first, last, group.value)
    print_spend(stdout, answer, output == SpendFormat.json)


def _local(
    path: Path, team: str | None, since: dt.date | None, until: dt.date | None, group: str
) -> dict[str, Any]:
    """The ledger of a local file, as ``GET /v1/spend`` answers it (team default)."""
    from api.access.caller import DEFAULT_TEAM  # noqa: PLC0415
    from api.access.teams import TeamStore  # noqa: PLC0415
    from api.control.spend import ledger_rows, month_start, team_budget  # noqa: PLC0415

    chosen = team or DEFAULT_TEAM
    first = since or month_start()
    last = until or dt.datetime.now(dt.UTC).date()
    con = open_read_only(path)
    try:
        rows = ledger_rows(con, chosen, first, last, group)
        budget = team_budget(con, TeamStore(con, get_settings().teams).policy(chosen))
    finally:
        con.close()
    return {
        "team": chosen,
        "since": first.isoformat(),
        "until": last.isoformat(),
        "group": group,
        "rows": rows,
        "total_usd": sum(float(r["usd"]) for r in rows),
        "budget": budget.to_json(),
    }
