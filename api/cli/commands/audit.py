"""``tokenbench audit``: the control plane's audit log, newest first (admins).

Reads ``GET /v1/audit`` with ``--server`` and ``--token``; ``--since`` and ``--until``
take a time (ISO 8601, UTC when it has no offset) or a duration back from now (``24h``,
``7d``). docs/teams.md, "The audit log".
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Annotated, Any

import typer

from analytics.render.fitted_tables import Column, fit, print_tables
from api.access.inputs import parse_duration
from api.cli.commands.tokens import (
    DEFAULT_SERVER,
    Format,
    FormatOption,
    ServerArg,
    out,
    print_json,
    when,
)
from api.cli.errors import exit_for
from api.cli.rest_client import TokenOption, get_json, remote
from scenarios.errors import BadInput


def moment(text: str | None, option: str) -> str | None:
    """``--since``/``--until`` as an ISO time: a time as given, or now minus a duration."""
    if text is None:
        return None
    try:
        return (dt.datetime.now(dt.UTC) - parse_duration(text)).isoformat()
    except BadInput:
        pass
    try:
        return dt.datetime.fromisoformat(text).isoformat()
    except ValueError:
        raise exit_for(
            BadInput(f"{option} {text!r}: a time (2026-01-31T12:00) or a duration (24h, 7d)")
        ) from None


def _value(value: Any) -> str:
    """A detail's value in few characters, with room to wrap (a time to the minute)."""
    if isinstance(value, dict):
        return "(" + ", ".join(f"{k}={_value(v)}" for k, v in value.items()) + ")"
    if value is None:
        return "–"
    if isinstance(value, str):
        try:
            return when(dt.datetime.fromisoformat(value).isoformat())
        except ValueError:
            return value
    return json.dumps(value, ensure_ascii=False)


def _detail(entry: dict[str, Any]) -> str:
    detail = entry.get("detail") or {}
    return ", ".join(f"{key}={_value(value)}" for key, value in detail.items())


def _print(entries: list[dict[str, Any]]) -> None:
    console = out()
    if not entries:
        console.print("no audit entries", highlight=False)
        return
    tables = fit(
        "audit log, newest first",
        [Column("time (UTC)", [when(e["happened_at"]) for e in entries], numeric=False)],
        [
            Column("token", [e["token_id"] or "–" for e in entries], numeric=False),
            Column("team", [e["team"] or "–" for e in entries], numeric=False),
            Column("action", [e["action"] for e in entries], numeric=False),
            Column("object", [e["object_id"] or "–" for e in entries], numeric=False),
            Column("outcome", [e["outcome"] for e in entries], numeric=False),
            Column("detail", [_detail(e) for e in entries], numeric=False, wraps=True),
        ],
        console.width,
    )
    print_tables(console, tables)


def audit(
    team: Annotated[str | None, typer.Option(help="Entries of this team's callers.")] = None,
    action: Annotated[
        str | None, typer.Option(help="One action, e.g. token.mint, run.submit.")
    ] = None,
    token_id: Annotated[str | None, typer.Option(help="Entries of this token id.")] = None,
    outcome: Annotated[str | None, typer.Option(help="ok, refused or failed.")] = None,
    kind: Annotated[
        str | None, typer.Option("--object-kind", help="What was acted on: token, team, run...")
    ] = None,
    object_id: Annotated[str | None, typer.Option("--object", help="Its id.")] = None,
    since: Annotated[str | None, typer.Option(help="From this time, or e.g. 24h ago.")] = None,
    until: Annotated[str | None, typer.Option(help="Before this time, or e.g. 1h ago.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="Entries shown.")] = 100,
    server: ServerArg = DEFAULT_SERVER,
    token: TokenOption = None,
    output: FormatOption = Format.table,
) -> None:
    """Show the audit log, newest first (admins)."""
    query = {
        "team": team,
        "action": action,
        "token_id": token_id,
        "outcome": outcome,
        "object_kind": kind,
        "object_id": object_id,
        "since": moment(since, "--since"),
        "until": moment(until, "--until"),
        "limit": limit,
    }
    with remote(server, token) as client:
        entries = get_json(client, "/v1/audit", query)
    if output is Format.json:
        print_json(entries)
    else:
        _print(entries)
