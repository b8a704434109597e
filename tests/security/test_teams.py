"""Two teams on one control plane, over real HTTP: who reads and who changes what.

Team red keeps its results to itself (visibility ``team``), team blue shares them
(``org``); each has a viewer and a submitter token, and the bootstrap token is the admin
(tests/support/teams.py). Every read and write path is tried by every role on each
team's objects (the access matrix: ``benchmarks/access_matrix.py`` prints it), then
``/v1/sql`` is searched for red's private rows as blue, and the audit log read back.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from analytics.query.snapshot import SqlScope
from api.local.redis_server import start_redis_server
from tests.support.teams import (
    NDJSON,
    Probe,
    TeamObjects,
    Teams,
    matrix_markdown,
    probe_matrix,
    scenario,
    team_stack,
)


@pytest.fixture(scope="module")
def teams(worker_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Teams]:
    # A Redis of its own: the stack lives for the module, and a test of another module
    # run between this module's tests on the same xdist worker may empty the session's
    # Redis (the fault tests do), which would take the worker's queue bindings with it.
    own = start_redis_server()
    env = {**worker_env, "TOKENBENCH__REDIS__URL": own.url}
    try:
        with team_stack(env, own.url, tmp_path_factory.mktemp("teams")) as stack:
            yield stack
    finally:
        own.stop()


@pytest.fixture(scope="module")
def objects(teams: Teams) -> dict[str, TeamObjects]:
    return {team: teams.seed(team) for team in ("red", "blue")}


@pytest.fixture(scope="module")
def matrix(teams: Teams, objects: dict[str, TeamObjects]) -> list[Probe]:
    return probe_matrix(teams, objects)


def _sql(teams: Teams, caller: str, query: str) -> tuple[int, Any]:
    answer = teams[caller].post("/v1/sql", json={"query": query, "max_staleness_s": 0})
    return answer.status_code, answer.json()


def _values(teams: Teams, caller: str, query: str) -> list[Any]:
    status, body = _sql(teams, caller, query)
    assert status == 200, body
    return [next(iter(row.values())) for row in body["rows"]]


def test_every_route_gives_every_role_the_status_of_the_rules(matrix: list[Probe]) -> None:
    wrong = [
        f"{p.route} as {p.caller} on {p.owner or '-'}: {p.status} (expected {p.expected}) {p.body}"
        for p in matrix
        if p.status != p.expected
    ]
    assert not wrong, "\n".join(wrong) + "\n\n" + matrix_markdown(matrix)


def test_lists_hold_only_what_the_caller_may_read(
    teams: Teams, objects: dict[str, TeamObjects]
) -> None:
    red, blue = objects["red"], objects["blue"]
    lists = {
        "/v1/runs": (red.run, blue.run),
        "/v1/scenarios": (red.scenario, blue.scenario),
        "/v1/datasets": (red.dataset, blue.dataset),
        "/v1/shadow-sessions": (red.session, blue.session),
    }
    for path, (red_id, blue_id) in lists.items():
        for caller, sees_red in (
            ("admin", True), ("red-viewer", True), ("blue-viewer", False),
            ("blue-submitter", False),
        ):  # fmt: skip
            answer = teams[caller].get(path)
            assert answer.status_code == 200, answer.text
            ids = {item["id"] for item in answer.json()}
            assert (red_id in ids) is sees_red, (path, caller)
            assert blue_id in ids, (path, caller)
    # Trends by name: red's runs are left out of blue's.
    for caller, sees in (("red-viewer", True), ("blue-viewer", False)):
        trend = teams[caller].get("/v1/trends", params={"name": "red-scenario"}).json()
        assert (red.run in {r["run_id"] for r in trend["runs"]}) is sees, caller


def test_a_report_cannot_compare_with_a_private_run(
    teams: Teams, objects: dict[str, TeamObjects]
) -> None:
    red, blue = objects["red"], objects["blue"]
    as_blue = teams["blue-viewer"].get(f"/v1/runs/{blue.run}/report", params={"compare": red.run})
    assert as_blue.status_code == 404, as_blue.text
    as_red = teams["red-viewer"].get(f"/v1/runs/{red.run}/report", params={"compare": blue.run})
    assert as_red.status_code == 200, as_red.text


def test_a_run_may_be_made_private_by_its_submitter(teams: Teams) -> None:
    created = teams["blue-submitter"].post(
        "/v1/runs", json={"scenario": scenario("blue-private"), "visibility": "team"}
    )
    assert created.status_code == 201, created.text
    run_id = created.json()["id"]
    assert teams["red-viewer"].get(f"/v1/runs/{run_id}").status_code == 404
    assert teams["blue-viewer"].get(f"/v1/runs/{run_id}").status_code == 200
    assert run_id not in _values(teams, "red-viewer", "SELECT run_id FROM runs")
    teams.wait_for_run(run_id)


def test_identical_bytes_uploaded_by_a_second_team_are_its_own_to_use(
    teams: Teams, objects: dict[str, TeamObjects]
) -> None:
    red = objects["red"]
    again = teams["blue-submitter"].post(
        "/v1/datasets?name=blue-copy.jsonl", content=red.dataset_bytes, headers=NDJSON
    )
    # 201: new for blue (a 200 would tell blue that another team holds these bytes),
    # with blue's own file name, never red's.
    assert again.status_code == 201, again.text
    assert again.json()["id"] == red.dataset
    assert again.json()["origin"] == "blue-copy.jsonl"
    shown = teams["blue-viewer"].get(f"/v1/datasets/{red.dataset}")
    assert shown.status_code == 200 and shown.json()["origin"] == "blue-copy.jsonl"
    used = teams["blue-submitter"].post(
        "/v1/scenarios", json=scenario(prompts={"dataset": red.dataset})
    )
    assert used.status_code == 201, used.text
    twice = teams["blue-submitter"].post("/v1/datasets", content=red.dataset_bytes, headers=NDJSON)
    assert twice.status_code == 200, twice.text
    # Red's copy keeps red's name.
    assert teams["red-viewer"].get(f"/v1/datasets/{red.dataset}").json()["origin"] == (
        "red-prompts.jsonl"
    )


def test_a_scenario_a_schedule_fires_is_not_deleted(
    teams: Teams, objects: dict[str, TeamObjects]
) -> None:
    answer = teams["blue-submitter"].delete(f"/v1/scenarios/{objects['blue'].scenario}")
    assert answer.status_code == 409, answer.text


def test_a_dataset_shared_by_content_stays_while_a_team_keeps_it(teams: Teams) -> None:
    data = b'{"prompt": "shared by content"}\n'
    first = teams["red-submitter"].post("/v1/datasets", content=data, headers=NDJSON)
    second = teams["blue-submitter"].post("/v1/datasets", content=data, headers=NDJSON)
    assert first.status_code == second.status_code == 201
    dataset = first.json()["id"]
    # Red removes its use: blue keeps the dataset (and now owns it).
    assert teams["red-submitter"].delete(f"/v1/datasets/{dataset}").status_code == 204
    assert teams["blue-viewer"].get(f"/v1/datasets/{dataset}").status_code == 200
    assert teams["red-submitter"].delete(f"/v1/datasets/{dataset}").status_code == 403
    assert teams["blue-submitter"].delete(f"/v1/datasets/{dataset}").status_code == 204
    for caller in ("admin", "red-viewer", "blue-viewer"):
        assert teams[caller].get(f"/v1/datasets/{dataset}").status_code == 404


def test_sql_holds_no_row_of_a_private_run_for_another_team(
    teams: Teams, objects: dict[str, TeamObjects]
) -> None:
    red, blue = objects["red"], objects["blue"]
    assert red.run in _values(teams, "red-viewer", "SELECT run_id FROM runs")
    assert red.run in _values(teams, "admin", "SELECT run_id FROM runs")
    for caller in ("blue-viewer", "blue-submitter"):
        assert red.run not in _values(teams, caller, "SELECT run_id FROM runs")
        assert blue.run in _values(teams, caller, "SELECT run_id FROM runs")
        records = _values(teams, caller, "SELECT DISTINCT run_id FROM request_records")
        assert red.run not in records and blue.run in records
        assert red.run not in _values(teams, caller, "SELECT DISTINCT run_id FROM requests")
        status, body = _sql(teams, caller, "SELECT * FROM (SUMMARIZE request_records)")
        assert status == 200, body
        assert red.run not in str(body)
        assert red.scenario not in str(_sql(teams, caller, "SELECT * FROM api_scenarios")[1])
        tables = _values(teams, caller, "SELECT table_name FROM duckdb_tables()")
        for admin_only in ("api_tokens", "audit_log", "teams", "object_owners"):
            assert admin_only not in tables
        status, body = _sql(teams, caller, "SELECT * FROM api_tokens")
        assert status >= 400, body
    assert "api_tokens" in _values(teams, "admin", "SELECT table_name FROM duckdb_tables()")
    # The copy blue's query process opens does not hold the private run at all.
    blue_copy = next(
        Path(teams.db).parent.glob(f"*.sql-snapshot.{SqlScope.of_team('blue', _none).key}.duckdb")
    )
    data = blue_copy.read_bytes()
    assert blue.run.encode() in data and red.run.encode() not in data


def _none(kind: str, column: str) -> tuple[str, list[object]]:
    return "TRUE", []


def test_every_change_and_query_is_audited(
    teams: Teams, objects: dict[str, TeamObjects], matrix: list[Probe]
) -> None:
    query = "SELECT 42 AS audited"
    assert _values(teams, "blue-viewer", query) == [42]
    # A refused query of its own (the test does not rely on another test's queries).
    refused, _ = _sql(teams, "blue-viewer", "SELECT * FROM duckdb_settings()")
    assert refused == 403
    status, body = _sql(
        teams,
        "admin",
        "SELECT action, outcome, team, object_id, detail FROM audit_log ORDER BY seq",
    )
    assert status == 200, body
    rows = body["rows"]
    actions = {(r["action"], r["outcome"]) for r in rows}
    for expected in (
        ("run.submit", "ok"), ("run.cancel", "ok"), ("run.cancel", "refused"),
        ("schedule.create", "ok"), ("schedule.pause", "ok"), ("schedule.delete", "ok"),
        ("schedule.delete", "refused"), ("dataset.upload", "ok"), ("scenario.store", "ok"),
        ("session.open", "ok"), ("session.stop", "ok"), ("session.stop", "refused"),
        ("sql.query", "ok"), ("sql.query", "refused"), ("scenario.delete", "ok"),
        ("scenario.delete", "refused"), ("dataset.delete", "ok"), ("dataset.delete", "refused"),
    ):  # fmt: skip
        assert expected in actions, expected
    digest = hashlib.sha256(query.encode()).hexdigest()
    assert any(r["action"] == "sql.query" and digest in str(r["detail"]) for r in rows)
    # Never a token in the audit log.
    for token in teams.tokens.values():
        assert token not in str(rows)


def test_expired_and_revoked_tokens_get_401_everywhere(
    teams: Teams, objects: dict[str, TeamObjects]
) -> None:
    red = objects["red"]
    for caller in ("expired", "revoked"):
        client = teams[caller]
        for answer in (
            client.get("/v1/runs"),
            client.get(f"/v1/runs/{red.run}"),
            client.post(f"/v1/runs/{red.run}/cancel"),
            client.post("/v1/sql", json={"query": "SELECT 1"}),
            client.get("/v1/datasets"),
            client.post("/v1/runs", json={"scenario": scenario()}),
        ):
            assert answer.status_code == 401, (caller, answer.request.url, answer.text)
