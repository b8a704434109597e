"""api/rest/auth.py: bearer tokens, 401 without one, 403 with a wrong one, every
configured token compared in constant time and none ever echoed."""

from __future__ import annotations

import hmac

import pytest
from fastapi import Depends, FastAPI
from fastapi.testclient import TestClient
from pydantic import SecretStr

from api.rest import auth
from api.rest.errors import install_error_handlers
from scenarios.settings import ApiSettings, Settings

TOKENS = ["first-token-1a2b", "second-token-3c4d"]


def _client(tokens: list[str]) -> TestClient:
    app = FastAPI()
    install_error_handlers(app)
    app.state.settings = Settings(api=ApiSettings(tokens=[SecretStr(t) for t in tokens]))

    @app.get("/protected", dependencies=[Depends(auth.require_token)])
    def protected() -> dict[str, str]:
        return {"ok": "yes"}

    return TestClient(app)


@pytest.mark.parametrize("token", TOKENS)
def test_every_configured_token_is_accepted(token: str) -> None:
    answer = _client(TOKENS).get("/protected", headers={"authorization": f"Bearer {token}"})
    assert answer.status_code == 200
    assert answer.json() == {"ok": "yes"}


@pytest.mark.parametrize(
    "header",
    [None, "Basic dXNlcjpwYXNz", "Bearer", f"Token {TOKENS[0]}"],
    ids=["none", "basic", "empty-bearer", "other-scheme"],
)
def test_without_a_bearer_token_401_asks_for_one(header: str | None) -> None:
    headers = {} if header is None else {"authorization": header}
    answer = _client(TOKENS).get("/protected", headers=headers)
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == "Bearer"
    assert answer.json() == {"detail": "missing bearer token", "error": "refused"}


@pytest.mark.parametrize(
    "offered",
    ["wrong", TOKENS[0][:-1], TOKENS[0] + "x", TOKENS[0].upper(), TOKENS[0] + TOKENS[1]],
    ids=["other", "prefix", "extended", "case", "both"],
)
def test_a_wrong_token_is_403_and_not_echoed(offered: str) -> None:
    answer = _client(TOKENS).get("/protected", headers={"authorization": f"Bearer {offered}"})
    assert answer.status_code == 403
    assert answer.json() == {"detail": "invalid token", "error": "refused"}
    assert all(token not in answer.text for token in TOKENS)


def test_no_configured_token_refuses_everything() -> None:
    answer = _client([]).get("/protected", headers={"authorization": f"Bearer {TOKENS[0]}"})
    assert answer.status_code == 403


def test_every_token_is_compared_in_constant_time_without_stopping_early(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def recording(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", recording)
    # The first configured token matches: the others are still compared, so the time
    # taken does not tell which token (or whether an early one) matched.
    answer = _client(TOKENS).get("/protected", headers={"authorization": f"Bearer {TOKENS[0]}"})
    assert answer.status_code == 200
    assert compared == [(TOKENS[0].encode(), t.encode()) for t in TOKENS]
