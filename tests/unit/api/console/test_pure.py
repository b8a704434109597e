"""The console's pure parts: which paths are the console's, progress rows per stage,
provider and region, the trend chart's points, the role check, submit problems."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from api import console
from api.access.caller import Caller, Role
from api.console.auth import need
from api.console.more import _chart
from api.console.pages import is_console_path
from api.console.reads import progress_rows
from api.console.routes import _problems
from api.rest.errors import install_error_handlers
from scenarios.errors import BadInput, Refused
from scenarios.loader import Problem, ScenarioError


def test_console_paths_are_all_but_the_api_s() -> None:
    for path in ("/", "/runs", "/runs/x/download/csv", "/static/console.js", "/nope"):
        assert is_console_path(path), path
    for path in ("/v1/runs", "/docs", "/openapi.json", "/healthz", "/readyz", "/metrics"):
        assert not is_console_path(path), path


def _shard(
    provider: str, region: str, done: int, errors: int, ttft: float | None
) -> dict[str, object]:
    return {"provider": provider, "region": region, "state": "running", "requests_done": done,
            "requests_planned": 10, "errors": errors, "ttft_p50_ms": ttft}  # fmt: skip


def test_progress_rows_sum_the_parts_of_a_split_level() -> None:
    view = {"stages": [{"index": 0, "shards": [
        _shard("a", "eu", 3, 1, 50.0), _shard("a", "eu", 4, 0, 70.0), _shard("b", "eu", 2, 0, None),
    ]}]}  # fmt: skip
    rows = progress_rows(view)
    assert [(r["provider"], r["done"], r["planned"], r["errors"]) for r in rows] == [
        ("a", 7, 20, 1), ("b", 2, 10, 0),
    ]  # fmt: skip
    assert rows[0]["ttft_p50_ms"] == 70.0 and rows[1]["ttft_p50_ms"] is None
    assert [r["state"] for r in rows] == ["running", "running"]


def test_a_row_whose_parts_ended_differently_names_each_state() -> None:
    parts = [_shard("a", "eu", 10, 0, 5.0), _shard("a", "eu", 3, 0, 5.0)]
    parts[0]["state"], parts[1]["state"] = "finished", "cancelled"
    (row,) = progress_rows({"stages": [{"index": 0, "shards": parts}]})
    assert row["state"] == "cancelled 1, finished 1"


def test_trend_chart_points_scale_to_the_largest_value() -> None:
    points = [
        {"metric": "ttft_p50_ms", "provider": "a", "region": "eu", "stage": 0, "value": v}
        for v in (10.0, 20.0)
    ] + [{"metric": "output_tok_s", "provider": "a", "region": "eu", "stage": 0, "value": 99.0}]
    (line,) = _chart({"points": points})
    assert line["points"] == "0.0,21.0 100.0,2.0" and line["top"] == 20.0
    assert _chart(None) == [] and _chart({"points": []}) == []


def test_a_viewer_is_refused_what_needs_a_submitter() -> None:
    with pytest.raises(Refused):
        need(Caller("t", "red", Role.VIEWER), Role.SUBMITTER)
    need(Caller("t", "red", Role.SUBMITTER), Role.SUBMITTER)


def test_submit_problems_name_their_field_and_line() -> None:
    error = ScenarioError([Problem("load.concurrency", "must be positive", 7)])
    assert _problems(error) == [
        {"path": "load.concurrency", "line": 7, "message": "must be positive"}
    ]
    assert _problems(BadInput("no"))[0] == {"path": "", "line": None, "message": "no"}


def test_install_serves_the_pages_and_the_static_files() -> None:
    app = FastAPI()
    console.install(app)
    with TestClient(app) as client:
        login = client.get("/login")
        assert login.status_code == 200 and 'id="login-form"' in login.text
        assert client.get("/static/console.css").status_code == 200
    assert app.state.console_sessions is not None and app.state.page_errors is not None


def test_an_unexpected_error_is_a_page_without_a_traceback() -> None:
    app = FastAPI()
    install_error_handlers(app)
    console.install(app)

    @app.get("/boom")
    async def boom() -> None:
        raise RuntimeError("secret internals /etc/passwd")

    @app.get("/v1/boom")
    async def api_boom() -> None:
        raise RuntimeError("secret internals")

    with TestClient(app, raise_server_exceptions=False) as client:
        page = client.get("/boom")
        assert page.status_code == 500 and '<main id="error"' in page.text
        assert "secret internals" not in page.text and "Traceback" not in page.text
        assert page.headers["content-security-policy"].startswith("default-src 'self'")
        assert page.headers["x-frame-options"] == "DENY"
        api = client.get("/v1/boom")
        assert api.status_code == 500 and api.json()["detail"] == "internal error"
