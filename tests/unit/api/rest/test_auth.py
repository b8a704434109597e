"""api/rest/auth.py with api/access/tokens.py: the same 401 for a missing, unknown,
malformed, expired or revoked token; 403 for a role that does not allow the route;
bootstrap tokens compared in constant time without stopping early; no token echoed."""

from __future__ import annotations

import datetime as dt
import hmac
from collections.abc import Iterator
from typing import Annotated

import duckdb
import pytest
from fastapi import Depends, FastAPI
from fastapi.testclient import TestClient

from analytics.sql.files import load_sql
from api.access import tokens as token_module
from api.access.caller import Caller, Role
from api.access.tokens import TokenRegistry, token_sha256
from api.rest import auth
from api.rest.errors import install_error_handlers

BOOTSTRAP = ["first-token-1a2b", "second-token-3c4d"]


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect()
    con.execute(load_sql("schema_v19"))
    yield con
    con.close()


def _client(registry: TokenRegistry) -> TestClient:
    app = FastAPI()
    install_error_handlers(app)
    app.state.tokens = registry

    @app.get("/protected")
    def protected(caller: Annotated[Caller, Depends(auth.require_caller)]) -> dict[str, str]:
        return {"team": caller.team, "role": caller.role.value}

    @app.get("/admin-only", dependencies=[Depends(auth.require_role(Role.ADMIN))])
    def admin_only() -> dict[str, str]:
        return {"ok": "yes"}

    return TestClient(app)


def _get(client: TestClient, token: str, path: str = "/protected") -> tuple[int, str]:
    answer = client.get(path, headers={"authorization": f"Bearer {token}"})
    return answer.status_code, answer.text


@pytest.mark.parametrize("token", BOOTSTRAP)
def test_bootstrap_tokens_are_admins_of_team_default(
    con: duckdb.DuckDBPyConnection, token: str
) -> None:
    answer = _client(TokenRegistry(con, BOOTSTRAP)).get(
        "/protected", headers={"authorization": f"Bearer {token}"}
    )
    assert answer.status_code == 200
    assert answer.json() == {"team": "default", "role": "admin"}


@pytest.mark.parametrize(
    "header",
    [None, "Basic dXNlcjpwYXNz", "Bearer", f"Token {BOOTSTRAP[0]}"],
    ids=["none", "basic", "empty-bearer", "other-scheme"],
)
def test_without_a_bearer_token_401_asks_for_one(
    con: duckdb.DuckDBPyConnection, header: str | None
) -> None:
    headers = {} if header is None else {"authorization": header}
    answer = _client(TokenRegistry(con, BOOTSTRAP)).get("/protected", headers=headers)
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == "Bearer"
    assert answer.json() == {"detail": auth.UNAUTHORIZED, "error": "refused"}


def test_unknown_expired_and_revoked_tokens_get_the_same_401(
    con: duckdb.DuckDBPyConnection,
) -> None:
    registry = TokenRegistry(con, BOOTSTRAP)
    live, _ = registry.mint("red", Role.VIEWER, "live", None, None)
    expired, _ = registry.mint(
        "red", Role.VIEWER, "old", dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1), None
    )
    revoked, record = registry.mint("red", Role.SUBMITTER, "gone", None, None)
    client = _client(registry)
    assert _get(client, revoked)[0] == 200
    registry.revoke(record.token_id)  # effective on the next request
    answers = {
        name: _get(client, token)
        for name, token in {
            "other": "wrong",
            "prefix": BOOTSTRAP[0][:-1],
            "case": BOOTSTRAP[0].upper(),
            "both": BOOTSTRAP[0] + BOOTSTRAP[1],
            "tampered": live[:-1] + ("A" if live[-1] != "A" else "B"),
            "expired": expired,
            "revoked": revoked,
        }.items()
    }
    assert {status for status, _ in answers.values()} == {401}
    assert len({text for _, text in answers.values()}) == 1
    assert _get(client, live) == (200, '{"team":"red","role":"viewer"}')
    every = [*BOOTSTRAP, live, expired, revoked]
    assert not any(token in text for _, text in answers.values() for token in every)


def test_a_role_below_the_route_is_403(con: duckdb.DuckDBPyConnection) -> None:
    registry = TokenRegistry(con, BOOTSTRAP)
    submitter, _ = registry.mint("red", Role.SUBMITTER, None, None, None)
    client = _client(registry)
    status, text = _get(client, submitter, "/admin-only")
    assert status == 403 and "admin role" in text
    assert _get(client, BOOTSTRAP[0], "/admin-only")[0] == 200


def test_only_hashes_are_stored_and_a_new_registry_reads_them(
    con: duckdb.DuckDBPyConnection,
) -> None:
    registry = TokenRegistry(con, [])
    token, record = registry.mint("blue", Role.ADMIN, "ops", None, "boot-x")
    stored = con.execute("SELECT * FROM api_tokens").fetchall()
    assert token not in repr(stored)
    assert stored[0][1] == token_sha256(token)
    # A restarted control plane knows the token, and the revocation.
    assert TokenRegistry(con, []).authenticate(token) == record.caller()
    registry.revoke(record.token_id)
    assert TokenRegistry(con, []).authenticate(token) is None


def test_no_token_configured_or_minted_refuses_everything(
    con: duckdb.DuckDBPyConnection,
) -> None:
    assert _get(_client(TokenRegistry(con, [])), BOOTSTRAP[0])[0] == 401


def test_bootstrap_tokens_are_compared_in_constant_time_without_stopping_early(
    con: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    compared: list[tuple[str, str]] = []
    real = hmac.compare_digest

    def recording(a: str, b: str) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(token_module.hmac, "compare_digest", recording)
    registry = TokenRegistry(con, BOOTSTRAP)
    # The first token matches: the other is still compared, so the time taken does not
    # tell which (or whether an early one) matched.
    assert registry.authenticate(BOOTSTRAP[0]) is not None
    digest = token_sha256(BOOTSTRAP[0])
    assert compared == [(digest, token_sha256(t)) for t in BOOTSTRAP]
    # A minted-looking token with no row is still compared once, against a dummy hash.
    compared.clear()
    assert registry.authenticate("tbk_tok-000000000000_" + "A" * 43) is None
    assert len(compared) == len(BOOTSTRAP) + 1
