"""``tokenbench gateway`` and ``tokenbench shadow ...``: run a gateway, read its session.

Registered in ``api.cli.app.COMMANDS`` as ``gateway`` and ``shadow``.
The gateway opens a shadow session on the control plane (``--server``), serves until
SIGINT/SIGTERM (both the same: its buffered records are published, then it stops the
session it opened; ``--session`` joins an existing one and leaves it open). Exit codes
follow the CLI's: 0 success (also after SIGINT/SIGTERM), 1 operational error (the
control plane or the primary is unreachable), 2 bad input (api/cli/errors.py).
"""

from __future__ import annotations

import json
import os
import socket
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from rich.console import Console

from analytics.shadow.report import print_comparison
from api.cli.errors import exit_for
from api.cli.local_db import open_read_only
from api.cli.rest_client import (
    ServerOption,
    TokenOption,
    one_source,
    open_client,
    raise_for,
    remote,
)
from scenarios.errors import BadInput, NotFound, TokenbenchError
from scenarios.gateway_config import load_gateway_config
from scenarios.loader import ScenarioError
from scenarios.settings import env_name, get_settings

# As every command's stderr: not wrapped at 80 columns when not a terminal (logs, pipes).
_err = Console(
    stderr=True, highlight=False, width=None if Console(stderr=True).is_terminal else 200
)


def _check(answer: httpx.Response, what: str) -> Any:
    """The answer's JSON; an error answer is an exit with its message and code."""
    try:
        raise_for(answer, f"{what}: ")
    except TokenbenchError as exc:
        raise exit_for(exc) from None
    return answer.json()


def gateway(
    config_path: Annotated[Path, typer.Option("--config", help="Gateway config (YAML/JSON).")],
    port: Annotated[int, typer.Option(help="Port to serve the OpenAI-compatible API on.")] = 8090,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    server: ServerOption = None,
    token: TokenOption = None,
    session: Annotated[
        str | None, typer.Option(help="Join this open session instead of opening one.")
    ] = None,
    instance: Annotated[
        str | None, typer.Option(help="Name of this gateway in records (default host-pid).")
    ] = None,
    wait_for_workers: Annotated[
        bool, typer.Option(help="Open the session even if a region has no live worker yet.")
    ] = False,
    drain_s: Annotated[
        float, typer.Option(help="On exit, keep storing shadow records this long.")
    ] = 10.0,
) -> None:
    """Serve an OpenAI-compatible gateway that mirrors sampled requests to shadow providers."""
    from api.cli.signals import sigterm_as_interrupt  # noqa: PLC0415
    from workers.gateway.server import Gateway, run  # noqa: PLC0415

    # SIGTERM as Ctrl-C while the session opens; once serving, both stop the gateway
    # cleanly (answers in flight end, the capture process flushes), then the session is
    # stopped below.
    sigterm_as_interrupt()

    try:
        config = load_gateway_config(config_path)
    except ScenarioError as exc:
        raise exit_for(exc, f"invalid gateway config\n{exc}") from None
    redis_url = get_settings().redis.url
    if redis_url is None:
        raise exit_for(BadInput(f"the gateway needs {env_name('redis.url')} (the workers' broker)"))
    if server is None:
        raise exit_for(BadInput("give --server (or TOKENBENCH_SERVER): the control plane URL"))
    with open_client(server, token) as client:
        opened = session is None
        if session is None:
            created = _check(
                client.post(
                    "/v1/shadow-sessions",
                    json={
                        "config": config.model_dump(mode="json"),
                        "wait_for_workers": wait_for_workers,
                    },
                ),
                "opening the shadow session",
            )
            session = str(created["id"])
        else:
            _check(client.get(f"/v1/shadow-sessions/{session}"), f"session {session}")
        name = instance or f"{socket.gethostname()}-{os.getpid()}"
        gateway_state = Gateway(config, session, name, redis_url)
        _err.print(
            f"gateway on http://{host}:{port}/v1 → {config.primary.name}; session {session}; "
            f"sampling {config.sample_rate:.2%} to {', '.join(config.regions)}"
            + (
                f"; fallbacks: {', '.join(f.name for f in config.fallbacks)}"
                if config.fallbacks
                else ""
            )
        )
        try:  # returns after SIGINT/SIGTERM, the capture process flushed
            run(gateway_state, host, port)
        except (RuntimeError, OSError) as exc:  # no key for the primary, port taken, ...
            _err.print(f"gateway not started: {exc}")
            raise typer.Exit(1) from None
        finally:
            if opened:
                _check(
                    client.post(f"/v1/shadow-sessions/{session}/stop", params={"drain_s": drain_s}),
                    "stopping the shadow session",
                )


shadow_app = typer.Typer(
    help="Shadow-traffic sessions: comparison and replay export.", no_args_is_help=True
)


class Format(StrEnum):
    """How the comparison is printed."""

    table = "table"
    json = "json"


@shadow_app.command("compare")
def compare(
    session: Annotated[str, typer.Argument(help="Session id.")],
    server: ServerOption = None,
    token: TokenOption = None,
    db: Annotated[Path | None, typer.Option(help="Read this DuckDB file instead.")] = None,
    output: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.table,
) -> None:
    """Each shadow against the primary over the same requests, per region."""
    one_source(server, db)
    if server is not None:
        with remote(server, token) as client:
            rows = _check(client.get(f"/v1/shadow-sessions/{session}/comparison"), session)
            rows = rows["comparison"]
    else:
        from analytics.shadow.capture import comparison, is_session  # noqa: PLC0415

        con = open_read_only(db or get_settings().duckdb.path)
        try:
            if not is_session(con, session):
                raise exit_for(NotFound(f"no shadow session {session!r}"))
            rows = comparison(con, session)
        finally:
            con.close()
    out = Console(width=None if Console().is_terminal else 200)
    if output == Format.json:
        out.print_json(json.dumps(rows, default=str))
    else:
        print_comparison(out, session, rows)


@shadow_app.command("export-replay")
def export_replay(
    session: Annotated[str, typer.Argument(help="Session id.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="JSONL file to write.")],
    server: ServerOption = None,
    token: TokenOption = None,
    db: Annotated[Path | None, typer.Option(help="Read this DuckDB file instead.")] = None,
) -> None:
    """Write the session's captured requests (stored with text) as a replay log for
    ``workload.replay`` (timestamp, messages, max_tokens)."""
    one_source(server, db)
    if server is not None:
        with remote(server, token) as client:
            answer = client.get(f"/v1/shadow-sessions/{session}/replay")
            if answer.status_code >= 400:
                _check(answer, session)
            payload = answer.content
    else:
        from analytics.shadow.capture import is_session  # noqa: PLC0415
        from analytics.shadow.replay import replay_jsonl  # noqa: PLC0415

        con = open_read_only(db or get_settings().duckdb.path)
        try:
            if not is_session(con, session):
                raise exit_for(NotFound(f"no shadow session {session!r}"))
            payload = replay_jsonl(con, session)
        finally:
            con.close()
    if not payload:
        raise exit_for(
            BadInput(
                f"session {session} has no requests captured with text "
                "(set privacy.store_text: true in the gateway config)"
            )
        )
    output.write_bytes(payload)
    count = payload.count(b"\n")
    _err.print(f"{count} requests written to {output}", soft_wrap=True)
