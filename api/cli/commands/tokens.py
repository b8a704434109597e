"""``tokenbench tokens create|list|show|revoke`` and ``tokenbench whoami``: API tokens on a
control plane.

Every subcommand talks to ``--server`` (``TOKENBENCH_SERVER``) with ``--token``
(``TOKENBENCH_TOKEN``) over REST (docs/teams.md). ``create`` prints the new token alone
on stdout (so ``TOKEN=$(tokenbench tokens create ...)`` keeps it) and a note on stderr
that it is shown this once; ``--format json`` prints the API's answers. Exit codes as
everywhere: 2 for bad input or a refusal (an unknown token, a role that may not do this),
1 when the control plane cannot be reached or refuses the token (401).
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.console import Console

from analytics.render.fitted_tables import Column, fit, print_tables
from api.cli.rest_client import TokenOption, get_json, raise_for, remote
from api.cli.streams import console_width

tokens_app = typer.Typer(
    help="Mint, list and revoke API tokens of a control plane (admins).",
    no_args_is_help=True,
)

DEFAULT_SERVER = "http://127.0.0.1:8080"
ServerArg = Annotated[str, typer.Option(envvar="TOKENBENCH_SERVER", help="Control plane URL.")]


class Format(StrEnum):
    """How an answer is printed: a terminal table, or the API's JSON."""

    table = "table"
    json = "json"


FormatOption = Annotated[Format, typer.Option("--format", help="Output format.")]
ROLES = ("viewer", "submitter", "admin")


def out() -> Console:
    """stdout, laid out for the terminal's width (or the pipe's)."""
    return Console(width=console_width())


def note(text: str) -> None:
    """A note on stderr."""
    Console(stderr=True, width=console_width(stderr=True)).print(
        text, highlight=False, markup=False, soft_wrap=True
    )


def emit(text: str) -> None:
    """A line of machine output on stdout, as it is (no markup, no wrapping), flushed."""
    stream = out().file
    stream.write(text + "\n")
    stream.flush()


def print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout."""
    emit(json.dumps(data, indent=2, ensure_ascii=False))


def when(value: Any) -> str:
    """A stored time as ``YYYY-MM-DD HH:MM`` (UTC), or a dash."""
    return "–" if not value else str(value)[:16].replace("T", " ")


def print_lines(lines: list[tuple[str, str]]) -> None:
    """Label and value pairs, the values aligned."""
    width = max(len(label) for label, _ in lines)
    console = out()
    for label, value in lines:
        console.print(f"{label:<{width}}  {value}", highlight=False, markup=False, soft_wrap=True)


def _print_tokens(tokens: list[dict[str, Any]]) -> None:
    console = out()
    if not tokens:
        console.print("no tokens", highlight=False)
        return
    tables = fit(
        "tokens, newest first",
        [Column("id", [t["id"] for t in tokens], numeric=False)],
        [
            Column("team", [t["team"] for t in tokens], numeric=False),
            Column("role", [t["role"] for t in tokens], numeric=False),
            Column("state", [t["state"] for t in tokens], numeric=False),
            Column("expires (UTC)", [when(t["expires_at"]) for t in tokens], numeric=False),
            Column("last used", [when(t["last_used_at"]) for t in tokens], numeric=False),
            Column("name", [t["name"] or "–" for t in tokens], numeric=False, wraps=True),
        ],
        console.width,
    )
    print_tables(console, tables)


def _print_token(token: dict[str, Any]) -> None:
    print_lines(
        [
            ("token", token["id"]),
            ("team", token["team"]),
            ("role", token["role"]),
            ("name", token["name"] or "–"),
            ("state", token["state"]),
            ("created", f"{when(token['created_at'])} by {token['created_by'] or '–'}"),
            ("expires", when(token["expires_at"])),
            ("revoked", when(token["revoked_at"])),
            ("last used", when(token["last_used_at"])),
        ]
    )


@tokens_app.command("create")
def create(
    team: Annotated[str, typer.Option(help="The team the token acts for (a lowercase slug).")],
    role: Annotated[str, typer.Option(help="viewer, submitter or admin.")],
    expires: Annotated[
        str | None, typer.Option(help="Expires after this long: 90d, 12h, 2w (at most 3650d).")
    ] = None,
    name: Annotated[str | None, typer.Option(help="A label: who or what holds it.")] = None,
    server: ServerArg = DEFAULT_SERVER,
    token: TokenOption = None,
    output: FormatOption = Format.table,
) -> None:
    """Mint a token (admins); prints it once on stdout."""
    body: dict[str, Any] = {"team": team, "role": role}
    if expires is not None:
        body["expires_in"] = expires
    if name is not None:
        body["name"] = name
    with remote(server, token) as client:
        response = client.post("/v1/tokens", json=body)
        raise_for(response)
        minted = response.json()
    if output is Format.json:
        print_json(minted)
    else:
        emit(minted["token"])
    expiry = f"expires {when(minted['expires_at'])} UTC" if minted["expires_at"] else "no expiry"
    note(
        f"token {minted['id']}: team {minted['team']}, role {minted['role']}, {expiry}. "
        "It is shown this once and not stored: keep it now."
    )


@tokens_app.command("list")
def list_tokens(
    team: Annotated[str | None, typer.Option(help="Only this team's tokens.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="Tokens shown.")] = 1000,
    server: ServerArg = DEFAULT_SERVER,
    token: TokenOption = None,
    output: FormatOption = Format.table,
) -> None:
    """List tokens, newest first (an admin sees every team's)."""
    with remote(server, token) as client:
        tokens = get_json(client, "/v1/tokens", {"team": team, "limit": limit})
    if output is Format.json:
        print_json(tokens)
    else:
        _print_tokens(tokens)


@tokens_app.command("show")
def show(
    token_id: Annotated[str, typer.Argument(help="Token id (tok-...).")],
    server: ServerArg = DEFAULT_SERVER,
    token: TokenOption = None,
    output: FormatOption = Format.table,
) -> None:
    """One token's row (never the token)."""
    with remote(server, token) as client:
        row = get_json(client, f"/v1/tokens/{token_id}")
    if output is Format.json:
        print_json(row)
    else:
        _print_token(row)


@tokens_app.command("revoke")
def revoke(
    token_id: Annotated[str, typer.Argument(help="Token id (tok-...).")],
    server: ServerArg = DEFAULT_SERVER,
    token: TokenOption = None,
    output: FormatOption = Format.table,
) -> None:
    """Revoke a token (admins): its next request is refused."""
    with remote(server, token) as client:
        response = client.post(f"/v1/tokens/{token_id}/revoke")
        raise_for(response)
        row = response.json()
    if output is Format.json:
        print_json(row)
    else:
        _print_token(row)
    note(f"token {token_id} revoked")


def whoami(
    server: ServerArg = DEFAULT_SERVER,
    token: TokenOption = None,
    output: FormatOption = Format.table,
) -> None:
    """Show the token's id, team, role, name and expiry (never the token)."""
    with remote(server, token) as client:
        me = get_json(client, "/v1/whoami")
    if output is Format.json:
        print_json(me)
        return
    boot = " (bootstrap: TOKENBENCH__API__TOKENS)" if me["bootstrap"] else ""
    print_lines(
        [
            ("token", me["token_id"] + boot),
            ("team", me["team"]),
            ("role", me["role"]),
            ("name", me["name"] or "–"),
            ("expires", when(me["expires_at"]) + (" UTC" if me["expires_at"] else "")),
        ]
    )
