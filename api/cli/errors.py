"""The one place the command line turns an error into a message and an exit code.

Every command reports a failure by raising ``exit_for(error)``: the message in red on
stderr, the exit code of the error's kind (``scenarios.errors``): 2 for the user's
input (bad input, not found, refused, conflict), 1 for an operational failure
(unavailable, timeout, internal). Outcomes that are not errors keep their own codes:
a run or a provider check that ended failed exits 1, an interrupted run 130.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from scenarios.errors import (
    BadInput,
    Conflict,
    NotFound,
    Refused,
    TokenbenchError,
    Unavailable,
)
from scenarios.loader import ScenarioError, load_scenario
from scenarios.model import Scenario

# The tree's kind of a control plane's HTTP error, for commands that talk to one. Any
# other status (authentication, a server error) is operational: the input may be fine.
# A 403 is the token's role or team refusing the request: the user's to change (exit 2).
_KIND_OF_STATUS: dict[int, type[TokenbenchError]] = {
    400: BadInput,
    403: Refused,
    404: NotFound,
    406: BadInput,
    409: Conflict,
    413: BadInput,
    422: BadInput,
}


def exit_for(error: TokenbenchError, message: str | None = None) -> typer.Exit:
    """Print ``message`` (default: the error's own) on stderr and return the ``typer.Exit``
    carrying the error's exit code; raise it ``from None`` (the message says it all)."""
    # Not wrapped at 80 columns when stderr is not a terminal (CI logs, pipes).
    err = Console(stderr=True, width=None if Console(stderr=True).is_terminal else 200)
    text = str(error) if message is None else message
    err.print(f"[red]{escape(text)}", highlight=False, soft_wrap=True)
    return typer.Exit(error.exit_code)


def error_for_status(status: int, message: str) -> TokenbenchError:
    """The error of the tree for a control plane's HTTP error answer."""
    return _KIND_OF_STATUS.get(status, Unavailable)(message)


def load_or_exit(path: Path) -> Scenario:
    """The scenario in ``path``; a bad one is an exit with its field-by-field message."""
    try:
        return load_scenario(path)
    except ScenarioError as exc:
        raise exit_for(exc, f"invalid scenario\n{exc}") from None
