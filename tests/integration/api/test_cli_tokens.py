"""`tokenbench tokens|whoami|teams|audit` against a served control plane: a token minted,
used, listed and revoked from the command line; team settings set and reset; the audit
log read back. Each command runs in-process (its output and exit code are what is
tested), the control plane over real HTTP."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
from celery import Celery
from pydantic import SecretStr

from api.cli.commands import audit as audit_command
from api.cli.commands import teams as teams_command
from api.cli.commands import tokens as tokens_command
from api.local.redis_server import RedisServer
from api.rest.app import create_app
from scenarios.settings import ApiSettings, DuckDBSettings, RedisSettings, Settings
from tests.conftest import API_TOKEN, CliResult
from tests.support.served_app import served

pytestmark = pytest.mark.integration

Cli = Callable[..., CliResult]


@pytest.fixture(scope="module")
def base(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The control plane's base URL."""
    settings = Settings(
        redis=RedisSettings(url=redis_server.url),
        duckdb=DuckDBSettings(path=tmp_path_factory.mktemp("cli-tokens") / "c.duckdb"),
        api=ApiSettings(tokens=[SecretStr(API_TOKEN)]),
    )
    with served(create_app(settings, Celery("cli-tokens", set_as_current=False))) as url:
        yield url


def as_user(cli: Cli, base: str, token: str, *args: str) -> CliResult:
    """``tokenbench ARGS`` against ``base`` with ``token``, 80 columns wide."""
    return cli(*args, env={"TOKENBENCH_SERVER": base, "TOKENBENCH_TOKEN": token, "COLUMNS": "80"})


def test_tokens_round_trip(tokenbench_in_process: Cli, base: str) -> None:
    cli = tokenbench_in_process
    made = as_user(
        cli, base, API_TOKEN, "tokens", "create", "--team", "cli-team", "--role", "submitter",
        "--expires", "30d", "--name", "nightly ci",
    )  # fmt: skip
    assert made.code == 0, made.stderr
    token = made.stdout.strip()
    assert token.startswith("tbk_tok-") and "\n" not in token
    assert "shown this once" in made.stderr and token not in made.stderr
    token_id = token.split("_")[1]

    me = as_user(cli, base, token, "whoami", "--format", "json")
    assert me.code == 0, me.stderr
    assert json.loads(me.stdout)["team"] == "cli-team" and token not in me.stdout
    table = as_user(cli, base, token, "whoami")
    assert "submitter" in table.stdout and token_id in table.stdout

    listed = as_user(cli, base, API_TOKEN, "tokens", "list", "--team", "cli-team")
    assert listed.code == 0, listed.stderr
    assert token_id in listed.stdout and "nightly ci" in listed.stdout
    assert max(len(line) for line in listed.stdout.splitlines()) <= 80
    rows = json.loads(as_user(cli, base, API_TOKEN, "tokens", "list", "--format", "json").stdout)
    assert token_id in [row["id"] for row in rows]
    shown = as_user(cli, base, API_TOKEN, "tokens", "show", token_id)
    assert "active" in shown.stdout

    # A submitter may not mint: exit 2 (a refusal), the role named.
    refused = as_user(cli, base, token, "tokens", "create", "--team", "x", "--role", "admin")
    assert refused.code == 2 and "admin role" in refused.stderr

    revoked = as_user(cli, base, API_TOKEN, "tokens", "revoke", token_id)
    assert revoked.code == 0 and "revoked" in revoked.stdout
    after = as_user(cli, base, token, "whoami")
    assert after.code == 1 and "401" in after.stderr

    bad = as_user(cli, base, API_TOKEN, "tokens", "create", "--team", "Bad", "--role", "viewer")
    assert bad.code == 2 and "team" in bad.stderr
    unknown = as_user(cli, base, API_TOKEN, "tokens", "revoke", "tok-000000000000")
    assert unknown.code == 2


def test_teams_and_audit(tokenbench_in_process: Cli, base: str) -> None:
    cli = tokenbench_in_process
    as_user(cli, base, API_TOKEN, "tokens", "create", "--team", "cli-b", "--role", "viewer")
    changed = as_user(
        cli, base, API_TOKEN, "teams", "set", "cli-b", "--visibility", "team",
        "--monthly-budget-usd", "100", "--max-concurrent-runs", "3",
    )  # fmt: skip
    assert changed.code == 0, changed.stderr
    assert "set for the team" in changed.stdout and "100" in changed.stdout
    shown = as_user(cli, base, API_TOKEN, "teams", "show", "cli-b", "--format", "json")
    settings = json.loads(shown.stdout)["settings"]
    assert settings["max_concurrent_runs"] == {
        "value": 3,
        "source": "team",
        "default_setting": "TOKENBENCH__TEAMS__MAX_CONCURRENT_RUNS",
    }
    reset = as_user(cli, base, API_TOKEN, "teams", "set", "cli-b", "--reset", "monthly-budget-usd")
    assert reset.code == 0, reset.stderr
    budget = next(line for line in reset.stdout.splitlines() if "monthly_budget_usd" in line)
    assert budget.split() == ["monthly_budget_usd", "unlimited", "default"]
    assert "TOKENBENCH__TEAMS__" in reset.stderr
    listed = as_user(cli, base, API_TOKEN, "teams", "list")
    assert listed.code == 0 and "cli-b" in listed.stdout and "3*" in listed.stdout
    assert max(len(line) for line in listed.stdout.splitlines()) <= 80
    assert as_user(cli, base, API_TOKEN, "teams", "set", "cli-b").code == 2

    log = as_user(cli, base, API_TOKEN, "audit", "--action", "team.update", "--since", "1h")
    assert log.code == 0, log.stderr
    assert "team.update" in log.stdout and "cli-b" in log.stdout
    about = as_user(
        cli, base, API_TOKEN, "audit", "--object-kind", "team", "--object", "cli-b",
        "--format", "json",
    )  # fmt: skip
    assert [e["action"] for e in json.loads(about.stdout)] == ["team.update", "team.update"]
    assert max(len(line) for line in log.stdout.splitlines()) <= 80
    entries = json.loads(
        as_user(cli, base, API_TOKEN, "audit", "--format", "json", "--limit", "3").stdout
    )
    assert len(entries) == 3 and entries[0]["seq"] > entries[-1]["seq"]
    assert as_user(cli, base, API_TOKEN, "audit", "--since", "yesterday").code == 2


def test_the_command_modules_name_their_help() -> None:
    assert tokens_command.tokens_app.info.help and teams_command.teams_app.info.help
    assert audit_command.audit.__doc__
