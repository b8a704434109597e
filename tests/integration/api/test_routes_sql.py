"""api/rest/routes/sql.py through the served app: answers from a copy of the database
as fresh as the caller asks, in the format asked for, capped in bytes. (Every SQL
refusal: tests/integration/test_sql_api.py.)"""

from __future__ import annotations

import csv
import io
import uuid

import pytest

from api.rest.routes import sql
from tests.integration.api.conftest import SQL_MAX_BYTES, RestStack, lonely_region, run_scenario

pytestmark = pytest.mark.integration


def _count(stack: RestStack, name: str, max_staleness_s: float) -> int:
    query = f"SELECT count(*) AS n FROM api_scenarios WHERE name = '{name}'"
    answer = stack.client.post("/v1/sql", json={"query": query, "max_staleness_s": max_staleness_s})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == sql.MEDIA["json"]
    assert answer.headers["x-tokenbench-rows"] == "1"
    body = answer.json()
    assert body["row_count"] == 1 and body["truncated"] is False
    return int(body["rows"][0]["n"])


def test_the_copy_is_refreshed_when_older_than_the_caller_accepts(rest_stack: RestStack) -> None:
    name = f"sql-{uuid.uuid4().hex[:8]}"
    assert _count(rest_stack, name, max_staleness_s=0) == 0  # a fresh copy
    stored = rest_stack.client.post(
        "/v1/scenarios", json=run_scenario(lonely_region()) | {"name": name}
    )
    assert stored.status_code == 201
    # An hour-old copy is good enough: the scenario stored since is not in it yet...
    assert _count(rest_stack, name, max_staleness_s=3600) == 0
    # ...but not for a caller that wants the data as of now.
    assert _count(rest_stack, name, max_staleness_s=0) == 1


def test_the_format_comes_from_the_body_else_the_accept_header(rest_stack: RestStack) -> None:
    query = {"query": "SELECT range AS i FROM range(3)"}
    by_accept = rest_stack.client.post("/v1/sql", json=query, headers={"accept": sql.MEDIA["csv"]})
    assert by_accept.headers["content-type"].startswith(sql.MEDIA["csv"])
    assert list(csv.reader(io.StringIO(by_accept.text))) == [["i"], ["0"], ["1"], ["2"]]
    by_body = rest_stack.client.post(
        "/v1/sql", json=query | {"format": "json"}, headers={"accept": sql.MEDIA["csv"]}
    )
    assert [row["i"] for row in by_body.json()["rows"]] == [0, 1, 2]
    assert rest_stack.client.post("/v1/sql", json=query | {"limit": 1}).status_code == 422


def test_an_answer_over_the_byte_cap_is_refused(rest_stack: RestStack) -> None:
    query = f"SELECT repeat('x', {SQL_MAX_BYTES}) AS big"
    answer = rest_stack.client.post("/v1/sql", json={"query": query})
    assert answer.status_code == 413, answer.text
    assert answer.json()["error"] == "bad_input" and answer.json()["kind"] == "too_large"
    assert f"larger than {SQL_MAX_BYTES} bytes" in answer.json()["detail"]
