"""One REST error body shape for every error of the tree."""

from __future__ import annotations

from fastapi import FastAPI, HTTPException
from fastapi.testclient import TestClient

from analytics.query.safe_sql import SqlRefused
from analytics.report.build import UnknownRunError
from api.rest.errors import (
    ProviderEgressDenied,
    RegionUnavailable,
    install_error_handlers,
)
from scenarios.errors import (
    Internal,
)
from scenarios.loader import Problem, ScenarioError
from scenarios.security.egress import EgressDenied


def _client() -> TestClient:
    app = FastAPI()
    install_error_handlers(app)
    errors: dict[str, Exception] = {
        "scenario": ScenarioError([Problem("providers.0.model", "missing", line=3)]),
        "egress": ProviderEgressDenied(1, EgressDenied("refused host")),
        "run": UnknownRunError("r-1"),
        "regions": RegionUnavailable(["mars"]),
        "sql": SqlRefused("no files"),
        "internal": Internal("secret detail"),
        "http": HTTPException(404, "no shadow session 'x'"),
    }

    @app.get("/{name}")
    def fail(name: str) -> None:
        raise errors[name]

    return TestClient(app, raise_server_exceptions=False)


def test_one_rest_body_shape() -> None:
    client = _client()
    answer = client.get("/scenario")
    assert answer.status_code == 422
    assert answer.json() == {
        "detail": [{"loc": ["scenario", "providers", 0, "model"], "msg": "missing", "line": 3}],
        "error": "bad_input",
    }
    answer = client.get("/egress")
    assert answer.status_code == 422
    assert answer.json()["detail"] == [
        {"loc": ["scenario", "providers", 1, "base_url"], "msg": "refused host"}
    ]
    answer = client.get("/run")
    assert (answer.status_code, answer.json()) == (
        404,
        {"detail": "no run 'r-1'", "error": "not_found"},
    )
    answer = client.get("/regions")
    assert answer.status_code == 409
    assert answer.json() == {
        "detail": "no live worker in region(s): mars",
        "error": "conflict",
        "regions": ["mars"],
    }
    answer = client.get("/sql")
    assert (answer.status_code, answer.json()) == (
        403,
        {"detail": "no files", "error": "refused", "kind": "refused"},
    )
    answer = client.get("/internal")
    assert answer.status_code == 500
    body = answer.json()
    assert body["detail"] == "internal error" and body["error"] == "internal"
    assert "secret" not in answer.text and len(body["error_id"]) == 12
    answer = client.get("/http")
    assert (answer.status_code, answer.json()) == (
        404,
        {"detail": "no shadow session 'x'", "error": "not_found"},
    )
