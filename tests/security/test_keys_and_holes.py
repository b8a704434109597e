"""Issue 23, keys and smaller holes, attacked over REST on the real stack.

* Keys and transport: a key bound to a host went to that host over plain http and on
  any port. The hostile worker binds ``HOST_ONLY_TEST_KEY`` to ``127.0.0.1`` (a bare
  host: https, port 443) and ``OTHER_PORT_TEST_KEY`` to ``http://127.0.0.1:1``; a
  scenario pointing either at the catcher (plain http on a free port) gets a failed
  shard naming the variable and the scheme/port rule, and the catcher receives nothing.
  ``BOUND_TEST_KEY``, bound explicitly to ``http://127.0.0.1:*``, still arrives.
* A schedule's ``webhook_url`` (user:password, secret path, query token) is shown in
  its public form by every REST answer, the CLI and the SQL API.
* A shadow session's ``fallbacks[].base_url`` is egress-checked at its own field.
* SQL errors are a class and a short message (``test_all_types()``), and no answer
  shows a server path (``duckdb_settings()``, ``duckdb_databases()``...).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import API_TOKEN, CliResult
from tests.fakes.catcher import Catcher
from tests.security.conftest import CANARIES, REGION, HostileStack, scenario_with, simulated

pytestmark = pytest.mark.integration


def submit(stack: HostileStack, scenario: dict[str, Any]) -> dict[str, Any]:
    created = stack.client.post("/v1/runs", json={"scenario": scenario})
    assert created.status_code == 201, created.text
    return stack.wait_for_run(created.json()["id"])


def only_shard(view: dict[str, Any]) -> dict[str, Any]:
    (shard,) = [s for stage in view["stages"] for s in stage["shards"]]
    return shard


def openai_at(catcher: Catcher, variable: str) -> dict[str, Any]:
    return {
        "name": "p",
        "kind": "openai",
        "base_url": f"{catcher.url}/v1",
        "model": "m",
        "api_key_env": variable,
    }


# ------------------------------------------------------------------ keys and transport


@pytest.mark.parametrize(
    ("variable", "rule"),
    [
        # Before: both were sent (the host matched, scheme and port were not looked at).
        ("HOST_ONLY_TEST_KEY", "that is https://127.0.0.1:443"),
        ("OTHER_PORT_TEST_KEY", "that is http://127.0.0.1:1"),
    ],
)
def test_a_key_goes_only_over_the_scheme_and_port_its_binding_names(
    hostile_stack: HostileStack, catcher: Catcher, variable: str, rule: str
) -> None:
    view = submit(hostile_stack, scenario_with(openai_at(catcher, variable)))
    shard = only_shard(view)
    assert shard["state"] == "failed", shard
    message = shard["message"] or ""
    assert f"{variable} may not be sent to host '127.0.0.1' (http, port {catcher.port})" in (
        message
    ), message
    assert rule in message, message
    assert "TOKENBENCH__WORKER__SECRET_HOSTS" in message, message
    assert shard["requests_done"] == 0
    assert catcher.requests == [] and hostile_stack.canaries_in(catcher.received()) == []
    hostile_stack.assert_healthy()


def test_an_explicit_loopback_binding_still_sends_its_key(
    hostile_stack: HostileStack, catcher: Catcher
) -> None:
    # Positive control: the same server, the variable bound as http://127.0.0.1:*.
    view = submit(hostile_stack, scenario_with(openai_at(catcher, "BOUND_TEST_KEY")))
    assert only_shard(view)["state"] == "finished", view
    assert hostile_stack.canaries_in(catcher.received()) == ["BOUND_TEST_KEY"]


def test_a_metrics_token_follows_the_same_rule(
    hostile_stack: HostileStack, catcher: Catcher
) -> None:
    provider = {
        **openai_at(catcher, "BOUND_TEST_KEY"),
        "metrics_url": f"{catcher.url}/metrics",
        "metrics_api_key_env": "HOST_ONLY_TEST_KEY",
    }
    submit(hostile_stack, scenario_with(provider))
    assert CANARIES["HOST_ONLY_TEST_KEY"].encode() not in catcher.received()
    assert not [r for r in catcher.requests if r.path.startswith("/metrics")]


# ------------------------------------------------------------------ webhook URLs

HOOK_USER, HOOK_PASSWORD, HOOK_PATH, HOOK_TOKEN = "hook", "pa55word", "T1/s3cret", "tk9zz"
HOOK_SECRETS = (HOOK_PASSWORD, "s3cret", HOOK_TOKEN)


@pytest.fixture
def schedule(hostile_stack: HostileStack, catcher: Catcher) -> Iterator[tuple[str, str]]:
    """A schedule (never firing during the test) whose webhook URL holds credentials."""
    stored = hostile_stack.client.post("/v1/scenarios", json=scenario_with(simulated()))
    assert stored.status_code == 201, stored.text
    url = (
        f"http://{HOOK_USER}:{HOOK_PASSWORD}@127.0.0.1:{catcher.port}/{HOOK_PATH}"
        f"?token={HOOK_TOKEN}"
    )
    body = {"scenario_id": stored.json()["id"], "cron": "0 0 1 1 *", "webhook_url": url}
    created = hostile_stack.client.post("/v1/schedules", json=body)
    assert created.status_code == 201, created.text
    assert not [s for s in HOOK_SECRETS if s in created.text], created.text
    schedule_id = created.json()["id"]
    yield schedule_id, f"http://[redacted]@127.0.0.1:{catcher.port}/[redacted]"
    hostile_stack.client.delete(f"/v1/schedules/{schedule_id}")


def test_webhook_credentials_are_in_no_rest_answer(
    hostile_stack: HostileStack, schedule: tuple[str, str]
) -> None:
    schedule_id, public = schedule
    client = hostile_stack.client
    answers = [
        client.get(f"/v1/schedules/{schedule_id}"),
        client.get("/v1/schedules"),
        client.post(f"/v1/schedules/{schedule_id}/pause"),
        client.post(f"/v1/schedules/{schedule_id}/resume"),
        client.get(f"/v1/schedules/{schedule_id}/runs"),
    ]
    for answer in answers:
        assert answer.status_code == 200, answer.text
        assert not [s for s in HOOK_SECRETS if s in answer.text], answer.text
    assert answers[0].json()["webhook_url"] == public
    assert [s["webhook_url"] for s in answers[1].json() if s["id"] == schedule_id] == [public]


def test_webhook_credentials_are_not_readable_over_sql(
    hostile_stack: HostileStack, schedule: tuple[str, str]
) -> None:
    schedule_id, public = schedule
    for query in (
        f"SELECT webhook_url FROM schedules WHERE schedule_id = '{schedule_id}'",
        "SELECT * FROM main.schedules",
        "SUMMARIZE schedules",
        "SELECT string_agg(webhook_url, ',') FROM schedules",
        "SELECT * FROM pragma_storage_info('schedules')",
    ):
        answer = hostile_stack.client.post(
            "/v1/sql", json={"query": query, "max_staleness_s": 0, "format": "json"}
        )
        assert answer.status_code == 200, answer.text
        assert not [s for s in HOOK_SECRETS if s in answer.text], (query, answer.text)
    first = hostile_stack.client.post(
        "/v1/sql",
        json={
            "query": f"SELECT webhook_url FROM schedules WHERE schedule_id = '{schedule_id}'",
            "max_staleness_s": 0,
            "format": "json",
        },
    )
    assert public in first.text, first.text


def test_webhook_credentials_are_not_printed_by_the_cli(
    hostile_stack: HostileStack,
    schedule: tuple[str, str],
    tokenbench: Callable[..., CliResult],
) -> None:
    schedule_id, public = schedule
    args = ("--server", hostile_stack.base, "--token", API_TOKEN)
    for command in (("schedule", "show", schedule_id, *args), ("schedule", "list", *args)):
        result = tokenbench(*command)
        assert result.code == 0, result.stderr
        assert not [s for s in HOOK_SECRETS if s in result.stdout + result.stderr], result.stdout
    shown = tokenbench("schedule", "show", schedule_id, *args)
    assert public in shown.stdout, shown.stdout


# ------------------------------------------------------------------ shadow fallbacks


@pytest.mark.parametrize(
    "base_url",
    [
        "http://169.254.169.254/latest/meta-data",
        "http://[::ffff:169.254.169.254]/v1",
        "http://100.100.100.200/v1",
        "file:///etc/passwd",
    ],
)
def test_a_shadow_fallback_base_url_is_egress_checked_at_its_field(
    hostile_stack: HostileStack, base_url: str
) -> None:
    config = {
        "primary": simulated("prod"),
        "fallbacks": [
            simulated("spare"),
            {"name": "meta", "kind": "openai", "model": "m", "base_url": base_url},
        ],
        "regions": [REGION],
    }
    answer = hostile_stack.client.post(
        "/v1/shadow-sessions", json={"config": config, "wait_for_workers": True}
    )
    # Before: 201, and the gateway forwarded to the metadata address on a failure.
    assert answer.status_code == 422, answer.text
    (problem,) = answer.json()["detail"]
    assert problem["loc"] == ["config", "fallbacks", 1, "base_url"], problem
    hostile_stack.assert_healthy()


# ------------------------------------------------------------------ SQL answers


def sql(stack: HostileStack, query: str) -> httpx.Response:
    return stack.client.post("/v1/sql", json={"query": query, "max_staleness_s": 0})


def server_paths(stack: HostileStack) -> list[str]:
    """Paths of the server the SQL copy lives under: none may appear in an answer."""
    return [str(stack.db.parent), "/root", "/home/", "/tmp/", ".duckdb/"]


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM duckdb_settings()",
        "SELECT value FROM duckdb_settings() WHERE name LIKE '%directory%'",
        "SELECT * FROM duckdb_databases()",
        "SELECT * FROM pragma_database_list",
        "SELECT * FROM duckdb_extensions()",
        "SELECT current_setting('temp_directory')",
        "SELECT current_setting('allowed_paths')",
        "SELECT current_setting('secret_directory')",
        "SELECT * FROM duckdb_temporary_files()",
        "SELECT * FROM query('SELECT * FROM duckdb_databases()')",
    ],
)
def test_sql_functions_that_show_server_paths_are_refused(
    hostile_stack: HostileStack, query: str
) -> None:
    # Before: these answered 200 with the copy's path, its temporary directory and the
    # home directory's secret directory (duckdb_extensions(): an error naming
    # /root/.duckdb/extensions/...).
    answer = sql(hostile_stack, query)
    assert answer.status_code == 403, answer.text
    assert answer.json()["kind"] == "refused", answer.text
    assert "not available to user SQL" in answer.json()["detail"]
    assert not [p for p in server_paths(hostile_stack) if p in answer.text], answer.text


@pytest.mark.parametrize("fmt", ["json", "csv", "parquet"])
def test_sql_errors_are_a_class_and_a_sentence_without_internals(
    hostile_stack: HostileStack, fmt: str
) -> None:
    # Before: 503 "the query process failed: OverflowError: days=-2147483646; must have
    # magnitude <= 999999999" (JSON), and Python's text for the other formats.
    answer = hostile_stack.client.post(
        "/v1/sql", json={"query": "SELECT * FROM test_all_types()", "format": fmt}
    )
    assert answer.status_code == 400, answer.text
    body = answer.json()
    assert body["kind"] == "invalid", body
    assert f"the {fmt} format cannot represent" in body["detail"], body
    for internal in ("OverflowError", "Traceback", "days=", "pyarrow", "Error:", ".py"):
        assert internal not in answer.text, answer.text
    assert sql(hostile_stack, "SELECT * FROM test_all_types()").status_code == 400
    # The arrow format holds every type: the same query answers.
    arrow = hostile_stack.client.post(
        "/v1/sql", json={"query": "SELECT * FROM test_all_types()", "format": "arrow"}
    )
    assert arrow.status_code == 200, arrow.text[:500]


def test_sql_error_text_has_no_server_path(hostile_stack: HostileStack) -> None:
    for query in (
        "SELECT * FROM read_text('/etc/hostname')",
        "SELECT * FROM duckdb_extension_repositories()",
        "SELECT * FROM no_such_table",
    ):
        answer = sql(hostile_stack, query)
        assert answer.status_code in (400, 403), answer.text
        assert answer.json()["kind"] in ("invalid", "refused"), answer.text
        assert not [p for p in server_paths(hostile_stack) if p in answer.text], answer.text
        assert "/etc/hostname" not in answer.text
    hostile_stack.assert_healthy()
