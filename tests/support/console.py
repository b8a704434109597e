"""A control plane with its web console, in this process (FastAPI's TestClient runs its
lifespan: the session's Redis, a DuckDB file of its own), with two teams' tokens and
stored runs: red's runs are private to red (``visibility: team``), blue's shared.

``XSS`` is a provider error message a hostile endpoint could send (names are held to a
pattern by the scenario model): the console must show it as text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from celery import Celery
from fastapi.testclient import TestClient
from pydantic import SecretStr

from analytics.store.db import connect
from analytics.store.runs import RunStore
from api.access.caller import Caller, Role
from api.access.ownership import Kind, Visibility, record_owner
from api.access.tokens import TokenRegistry
from api.rest.app import create_app
from scenarios.settings import ApiSettings, DuckDBSettings, RedisSettings, Settings, TeamSettings
from tests.support.builders import failed_result, ok_result, store_run
from tests.support.teams import mint_team_tokens
from workers.client.errors import ErrorClass

XSS = "<script>alert('pwned')</script>"
RED_RUN = "run-red-private"
BLUE_RUN = "run-blue-shared"
XSS_RUN = "run-xss"
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def _scenario(name: str) -> dict[str, object]:
    return {
        "name": name,
        "providers": [{"name": "sim", "kind": "simulated"}, {"name": "alt", "kind": "simulated"}],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 4},
                    "output_tokens": {"dist": "fixed", "value": 2},
                }
            ]
        },
        "load": {"concurrency": [1], "requests_per_level": 2},
    }


def _store(db: Path, tokens: TokenRegistry) -> None:
    con = tokens.con
    ok = [ok_result(10**9, 80.0, [1.0] * 4), ok_result(2 * 10**9, 90.0, [1.0] * 4)]
    bad = [ok_result(10**9, 80.0, [1.0] * 4), failed_result(2 * 10**9, ErrorClass.HTTP_5XX, XSS)]
    for run_id, team, visibility, name, results in (
        (RED_RUN, "red", Visibility.TEAM, "red-secret", ok),
        (BLUE_RUN, "blue", Visibility.ORG, "blue-shared", ok),
        (XSS_RUN, "blue", Visibility.ORG, "xss-errors", bad),
    ):
        store_run(con, run_id, _scenario(name), {("sim", 0): results, ("alt", 0): ok})
        RunStore(con).finish_run(run_id, "finished")
        record_owner(con, Kind.RUN, run_id, Caller("seed", team, Role.SUBMITTER), visibility)


@dataclass
class ConsoleStack:
    """The console's test client (no cookies yet) and the tokens by caller name."""

    client: TestClient
    tokens: dict[str, str]

    def sign_in(self, who: str) -> TestClient:
        """``client`` signed in as ``who`` (its cookies hold the session)."""
        self.client.cookies.clear()
        page = self.client.get("/login")
        answer = self.client.post(
            "/login",
            data={"token": self.tokens[who], "csrf": csrf_of(page.text)},
            follow_redirects=False,
        )
        assert answer.status_code == 303, answer.text
        return self.client


def csrf_of(html: str) -> str:
    """The CSRF token of a page's first form."""
    found = _CSRF.search(html)
    assert found, "no csrf field on the page"
    return found.group(1)


@contextmanager
def console_stack(redis_url: str, tmp: Path, admin_token: str) -> Iterator[ConsoleStack]:
    """The app over a database holding the teams' tokens and runs."""
    db = tmp / "console.duckdb"
    tokens = mint_team_tokens(db, admin_token)
    con = connect(db)
    try:
        _store(db, TokenRegistry(con))
    finally:
        con.close()
    settings = Settings(
        redis=RedisSettings(url=redis_url),
        duckdb=DuckDBSettings(path=db),
        api=ApiSettings(tokens=[SecretStr(admin_token)]),
        teams=TeamSettings(requests_per_s=10_000, request_burst=100_000),
    )
    app = create_app(settings, Celery("console-tests", set_as_current=False))
    with TestClient(app, base_url="http://testserver") as client:
        yield ConsoleStack(client, tokens)
