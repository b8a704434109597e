"""The command line maps each error kind, and each control-plane status, to its exit code."""

from __future__ import annotations

import pytest
import typer

from api.cli.errors import error_for_status, exit_for
from scenarios.errors import (
    BadInput,
    Conflict,
    NotFound,
    Refused,
    Unavailable,
)


def test_the_cli_exits_with_the_kind_code(capsys: pytest.CaptureFixture[str]) -> None:
    exit_ = exit_for(NotFound("no run 'x'"))
    assert isinstance(exit_, typer.Exit) and exit_.exit_code == 2
    assert "no run 'x'" in capsys.readouterr().err
    assert exit_for(Unavailable("down")).exit_code == 1
    assert exit_for(BadInput("x"), "[bracketed] message").exit_code == 2
    assert "[bracketed] message" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        *[(400, BadInput), (404, NotFound), (409, Conflict), (413, BadInput), (422, BadInput)],
        # A role or team refusing the request: the user's to change, exit 2.
        (403, Refused),
        # Authentication and server errors are operational: exit 1, as before.
        *[(401, Unavailable), (500, Unavailable), (503, Unavailable)],
    ],
)
def test_a_control_plane_status_maps_to_a_kind(status: int, kind: type) -> None:
    assert type(error_for_status(status, "m")) is kind
