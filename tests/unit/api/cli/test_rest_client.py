"""The command line's REST client (api/cli/rest_client.py): HTTP error answers become
errors of the tree with the server's own words, and one data source per command."""

from __future__ import annotations

import httpx
import pytest
import typer

from api.cli.rest_client import one_source, raise_for
from scenarios.errors import BadInput, Conflict, NotFound, Unavailable


def _answer(status: int, **kwargs: object) -> httpx.Response:
    return httpx.Response(status, request=httpx.Request("GET", "http://cp/v1/x"), **kwargs)  # type: ignore[arg-type]


def test_a_success_raises_nothing() -> None:
    raise_for(_answer(200, json={"ok": True}))


@pytest.mark.parametrize(
    ("status", "kind"), [(422, BadInput), (404, NotFound), (409, Conflict), (503, Unavailable),
                         (401, Unavailable)]
)  # fmt: skip
def test_an_error_answer_is_its_kind_of_the_tree(status: int, kind: type[Exception]) -> None:
    with pytest.raises(kind, match=f"run r: HTTP {status}: nope"):
        raise_for(_answer(status, json={"detail": "nope", "error": "x"}), "run r: ")


def test_field_problems_are_one_line_each_with_their_path() -> None:
    body = {"detail": [{"loc": ["scenario", "load", "concurrency"], "msg": "too big"},
                       "plain"], "error": "bad_input"}  # fmt: skip
    with pytest.raises(BadInput) as error:
        raise_for(_answer(422, json=body))
    assert str(error.value) == "HTTP 422: scenario.load.concurrency: too big\nplain"


def test_a_body_that_is_not_json_is_quoted_and_cut() -> None:
    with pytest.raises(Unavailable) as error:
        raise_for(_answer(502, text="<html>" + "x" * 2000))
    assert str(error.value).startswith("HTTP 502: <html>x")
    assert len(str(error.value)) < 600


def test_server_and_db_together_are_bad_input(tmp_path: object) -> None:
    one_source("http://cp", None)
    one_source(None, None)
    with pytest.raises(typer.Exit) as exit_info:
        one_source("http://cp", tmp_path)  # type: ignore[arg-type]
    assert exit_info.value.exit_code == 2
