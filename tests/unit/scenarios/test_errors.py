"""The error tree: each domain error's kind, exit code and HTTP status; one REST body."""

from __future__ import annotations

import pytest
import typer
from fastapi import FastAPI, HTTPException
from fastapi.testclient import TestClient

from analytics.datasets import UnknownDatasetError
from analytics.report import UnknownProviderError, UnknownRunError
from analytics.safe_sql import DatabaseBusyError, SqlError, SqlRefused, SqlTimeout, SqlTooLarge
from analytics.sql_process import SqlUnavailable
from api.cli.errors import error_for_status, exit_for
from api.cli.plan import PlanInputError
from api.rest.errors import (
    ProviderEgressDenied,
    RegionUnavailable,
    UnknownScenarioError,
    install_error_handlers,
)
from scenarios.catalog.loader import CatalogError, UnknownIdError
from scenarios.egress import EgressDenied
from scenarios.errors import (
    BadInput,
    Conflict,
    Internal,
    NotFound,
    TokenbenchError,
    Unavailable,
)
from scenarios.loader import Problem, ScenarioError
from scenarios.workload_files import WorkloadFileError
from workers.ownership import RedisUnavailable
from workers.provider_setup import ProviderSetupError
from workers.secrets import SecretRefused


@pytest.mark.parametrize(
    ("error", "kind", "exit_code", "status"),
    [
        (ScenarioError([Problem("load", "bad")]), "bad_input", 2, 422),
        (CatalogError(["bad"], "c.yaml"), "bad_input", 2, 422),
        (WorkloadFileError("bad", "f.jsonl", 2), "bad_input", 2, 422),
        (PlanInputError("bad"), "bad_input", 2, 422),
        (ProviderSetupError("bad"), "bad_input", 2, 422),
        (UnknownIdError("model", "x", ["y"]), "not_found", 2, 404),
        (UnknownRunError("r"), "not_found", 2, 404),
        (UnknownProviderError("p", ["q"]), "not_found", 2, 404),
        (UnknownDatasetError("ds-1"), "not_found", 2, 404),
        (UnknownScenarioError("sc-1"), "not_found", 2, 404),
        (EgressDenied("no"), "refused", 2, 403),
        (SecretRefused("no"), "refused", 2, 403),
        (RegionUnavailable(["mars"]), "conflict", 2, 409),
        (RedisUnavailable("down"), "unavailable", 1, 503),
        (DatabaseBusyError("busy"), "unavailable", 1, 503),
        (SqlError("bad"), "bad_input", 2, 400),
        (SqlRefused("no"), "refused", 2, 403),
        (SqlTimeout("slow"), "timeout", 2, 408),
        (SqlTooLarge("big"), "bad_input", 2, 413),
        (SqlUnavailable("down"), "unavailable", 1, 503),
    ],
)
def test_domain_errors_carry_their_kind(
    error: TokenbenchError, kind: str, exit_code: int, status: int
) -> None:
    assert (error.kind, error.exit_code, error.http_status) == (kind, exit_code, status)


def test_domain_errors_keep_their_builtin_base() -> None:
    # Existing ``except ValueError`` / ``except LookupError`` clauses still catch them.
    assert isinstance(ScenarioError([]), ValueError)
    assert isinstance(UnknownRunError("r"), LookupError)
    assert isinstance(SqlRefused("no"), SqlError)
    assert isinstance(RedisUnavailable("down"), RuntimeError)


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
        # Authentication and server errors are operational: exit 1, as before.
        *[(401, Unavailable), (403, Unavailable), (500, Unavailable), (503, Unavailable)],
    ],
)
def test_a_control_plane_status_maps_to_a_kind(status: int, kind: type) -> None:
    assert type(error_for_status(status, "m")) is kind


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
