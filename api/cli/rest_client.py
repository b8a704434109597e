"""The command line's client of a control plane's REST API (``--server URL``).

One place for what every command that talks to a control plane needs: the ``--server``
and ``--token`` options, an authenticated ``httpx`` client, and the error of the tree
for an HTTP error answer (exit codes as for any CLI error, api/cli/errors.py).
``submit``, ``gateway``, ``shadow``, ``report`` and ``sql`` use it.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer

from analytics.report.build import RunReport
from api.cli.errors import error_for_status, exit_for
from scenarios.errors import BadInput, TokenbenchError, Unavailable

ServerOption = Annotated[
    str | None,
    typer.Option(
        envvar="TOKENBENCH_SERVER",
        help="Control plane URL, e.g. http://host:8080: read through its REST API.",
    ),
]
TokenOption = Annotated[
    str | None, typer.Option(envvar="TOKENBENCH_TOKEN", help="Control plane bearer token.")
]


def one_source(server: str | None, db: Path | None) -> None:
    """Refuse ``--server`` together with ``--db``: a command reads one or the other."""
    if server is not None and db is not None:
        raise exit_for(BadInput("give --server (or TOKENBENCH_SERVER) or --db, not both"))


def open_client(server: str, token: str | None, timeout_s: float = 30) -> httpx.Client:
    """A client of the control plane at ``server``, sending ``token`` if given."""
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=server.rstrip("/"), headers=headers, timeout=timeout_s)


@contextlib.contextmanager
def remote(server: str, token: str | None, timeout_s: float = 30) -> Iterator[httpx.Client]:
    """A client for one command: an error of the tree raised inside, or a control plane
    that cannot be reached, becomes the command's message and exit code."""
    try:
        with open_client(server, token, timeout_s) as client:
            yield client
    except TokenbenchError as exc:
        raise exit_for(exc) from None
    except httpx.HTTPError as exc:
        raise exit_for(Unavailable(f"cannot reach {server}: {exc}")) from None


def raise_for(response: httpx.Response, context: str = "") -> None:
    """Raise the error of the tree for an HTTP error answer (its message prefixed by
    ``context``); nothing for a success."""
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
            if isinstance(item, dict)
            else str(item)
            for item in detail
        ]
        message = "\n".join(lines)
    else:
        message = str(detail)
    status = response.status_code
    raise error_for_status(status, f"{context}HTTP {status}: {message}")


def get_json(
    client: httpx.Client, path: str, params: dict[str, Any] | None = None, context: str = ""
) -> Any:
    """``GET path?params`` (None values left out) decoded from JSON; an error answer
    raises its error of the tree, its message prefixed by ``context``."""
    query = {k: v for k, v in (params or {}).items() if v is not None}
    response = client.get(path, params=query)
    raise_for(response, context)
    return response.json()


def fetch_report(client: httpx.Client, run_id: str, **params: str | None) -> RunReport:
    """The run's report from the control plane (``params``: the route's query, e.g.
    ``compare`` or ``providers``), as the object every output format renders."""
    data = get_json(client, f"/v1/runs/{run_id}/report", params)
    names = {f.name for f in dataclasses.fields(RunReport)}
    return RunReport(**{key: value for key, value in data.items() if key in names})
