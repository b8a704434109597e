"""/v1/tokens, /v1/whoami, /v1/teams and /v1/audit over HTTP against a served control
plane of this module's own (its own DuckDB file, a small token cap): mint → use → list →
revoke → 401, expiry, role refusals (each audited), team settings with their sources."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from celery import Celery
from pydantic import SecretStr

from api.access.inputs import TEAM_PATTERN
from api.access.teams import SETTABLE
from api.local.redis_server import RedisServer
from api.rest.app import create_app
from api.rest.routes.audit import AuditEntry
from api.rest.routes.teams import TeamPublic
from api.rest.routes.tokens import TokenMinted
from scenarios.settings import (
    ApiSettings,
    DuckDBSettings,
    RedisSettings,
    Settings,
    TeamSettings,
)
from tests.conftest import API_TOKEN
from tests.support.served_app import served

pytestmark = pytest.mark.integration

MAX_TOKENS = 40


def _app(redis_url: str, db: Path, max_tokens: int = MAX_TOKENS) -> Any:
    settings = Settings(
        redis=RedisSettings(url=redis_url),
        duckdb=DuckDBSettings(path=db),
        api=ApiSettings(tokens=[SecretStr(API_TOKEN)]),
        teams=TeamSettings(max_tokens=max_tokens),
    )
    return create_app(settings, Celery("tokens-tests", set_as_current=False))


@pytest.fixture(scope="module")
def base(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The control plane's base URL."""
    with served(_app(redis_server.url, tmp_path_factory.mktemp("tokens") / "t.duckdb")) as url:
        yield url


def client(base: str, token: str | None = API_TOKEN) -> httpx.Client:
    """A client sending ``token`` (none: anonymous)."""
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=base, headers=headers, timeout=30)


def mint(base: str, team: str, role: str, **extra: Any) -> dict[str, Any]:
    """A token minted by the bootstrap admin; its answer."""
    with client(base) as admin:
        answer = admin.post("/v1/tokens", json={"team": team, "role": role, **extra})
    assert answer.status_code == 201, answer.text
    TokenMinted.model_validate(answer.json())
    return dict(answer.json())


def test_mint_use_list_revoke(base: str) -> None:
    minted = mint(base, "alpha", "submitter", name="ci", expires_in="90d")
    token = minted["token"]
    assert token.startswith(f"tbk_{minted['id']}_")
    assert minted["state"] == "active" and minted["created_by"].startswith("boot-")
    with client(base, token) as user:
        me = user.get("/v1/whoami").json()
        assert me == {
            "token_id": minted["id"],
            "team": "alpha",
            "role": "submitter",
            "name": "ci",
            "bootstrap": False,
            "expires_at": minted["expires_at"],
        }
        # A member lists its own team's tokens, never the token itself.
        listed = user.get("/v1/tokens").json()
        assert [t["id"] for t in listed] == [minted["id"]]
        assert token not in user.get("/v1/tokens").text
        assert user.get("/v1/tokens", params={"team": "beta"}).json() == []
    with client(base) as admin:
        assert minted["id"] in [t["id"] for t in admin.get("/v1/tokens").json()]
        only = admin.get("/v1/tokens", params={"team": "alpha"}).json()
        assert {t["team"] for t in only} == {"alpha"}
        revoked = admin.post(f"/v1/tokens/{minted['id']}/revoke")
        assert revoked.status_code == 200 and revoked.json()["state"] == "revoked"
        # Twice is harmless.
        assert admin.post(f"/v1/tokens/{minted['id']}/revoke").status_code == 200
        assert admin.get(f"/v1/tokens/{minted['id']}").json()["state"] == "revoked"
    with client(base, token) as user:
        assert user.get("/v1/whoami").status_code == 401
    with client(base) as admin:
        me = admin.get("/v1/whoami").json()
        assert me["bootstrap"] is True and me["team"] == "default" and me["role"] == "admin"


def test_the_mint_answer_is_not_cached(base: str) -> None:
    with client(base) as admin:
        answer = admin.post("/v1/tokens", json={"team": "alpha", "role": "viewer"})
    assert answer.headers["cache-control"] == "no-store"


def test_an_expired_token_gets_the_unknown_tokens_401(base: str) -> None:
    at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=2)
    minted = mint(base, "alpha", "viewer", expires_at=at.isoformat())
    with client(base, minted["token"]) as user:
        assert user.get("/v1/whoami").status_code == 200
        deadline = time.monotonic() + 30
        while (answer := user.get("/v1/whoami")).status_code == 200:
            assert time.monotonic() < deadline
            time.sleep(0.2)
    with client(base, "tbk_tok-000000000000_" + "A" * 43) as unknown:
        other = unknown.get("/v1/whoami")
    assert answer.status_code == other.status_code == 401
    assert answer.content == other.content and answer.headers["www-authenticate"] == "Bearer"
    with client(base) as admin:
        assert admin.get(f"/v1/tokens/{minted['id']}").json()["state"] == "expired"


@pytest.mark.parametrize(
    "body",
    [
        {"team": "Alpha", "role": "viewer"},
        {"team": "-x", "role": "viewer"},
        {"team": "a" * 64, "role": "viewer"},
        {"team": "a/b", "role": "viewer"},
        {"team": "alpha", "role": "owner"},
        {"team": "alpha", "role": "viewer", "expires_in": "3651d"},
        {"team": "alpha", "role": "viewer", "expires_in": "90 days"},
        {"team": "alpha", "role": "viewer", "expires_in": "0d"},
        {"team": "alpha", "role": "viewer", "expires_at": "2001-01-01T00:00:00Z"},
        {"team": "alpha", "role": "viewer", "expires_in": "1d", "expires_at": "2100-01-01T00:00Z"},
        {"team": "alpha", "role": "viewer", "name": "a\nb"},
        {"team": "alpha", "role": "viewer", "extra": 1},
    ],
)
def test_bad_mint_bodies_are_422(base: str, body: dict[str, Any]) -> None:
    with client(base) as admin:
        answer = admin.post("/v1/tokens", json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"] == "bad_input"


def test_the_team_pattern_is_the_documented_one() -> None:
    assert TEAM_PATTERN == "^[a-z0-9][a-z0-9_-]{0,62}$"


@pytest.mark.parametrize("role", ["viewer", "submitter"])
def test_only_admins_mint_revoke_change_teams_and_read_the_audit(base: str, role: str) -> None:
    minted = mint(base, "gamma", role)
    victim = mint(base, "gamma", "viewer")
    with client(base, minted["token"]) as user:
        # A submitter cannot mint any token, an admin one least of all.
        for wanted in ("admin", "submitter", "viewer"):
            answer = user.post("/v1/tokens", json={"team": "gamma", "role": wanted})
            assert answer.status_code == 403, answer.text
        assert user.post(f"/v1/tokens/{victim['id']}/revoke").status_code == 403
        assert user.patch("/v1/teams/gamma", json={"visibility": "team"}).status_code == 403
        assert user.get("/v1/audit").status_code == 403
        # What they may do: read their own team.
        own = user.get("/v1/teams")
        assert [t["team"] for t in own.json()] == ["gamma"]
        assert user.get("/v1/teams/gamma").status_code == 200
        assert user.get("/v1/teams/alpha").status_code == 404
        assert user.get(f"/v1/tokens/{victim['id']}").status_code == 200
    with client(base, victim["token"]) as still:
        assert still.get("/v1/whoami").status_code == 200
    with client(base) as admin:
        refused = admin.get(
            "/v1/audit", params={"token_id": minted["id"], "outcome": "refused"}
        ).json()
    actions = sorted(e["action"] for e in refused)
    assert actions == ["team.update", "token.mint", "token.mint", "token.mint", "token.revoke"]
    assert {e["role"] for e in refused} == {role}


def test_another_teams_token_is_a_404_to_a_member(base: str) -> None:
    theirs = mint(base, "delta", "viewer")
    mine = mint(base, "epsilon", "admin")
    member = mint(base, "epsilon", "viewer")
    with client(base, member["token"]) as user:
        assert user.get(f"/v1/tokens/{theirs['id']}").status_code == 404
        assert user.get("/v1/tokens/tok-000000000000").status_code == 404
    # Admins are organisation-wide: an admin of team epsilon mints for team delta.
    with client(base, mine["token"]) as admin:
        answer = admin.post("/v1/tokens", json={"team": "delta", "role": "submitter"})
        assert answer.status_code == 201
        assert admin.get(f"/v1/tokens/{theirs['id']}").status_code == 200
        assert admin.get("/v1/teams/delta").status_code == 200


def test_team_settings_show_their_source_and_reset(base: str) -> None:
    mint(base, "zeta", "viewer")
    with client(base) as admin:
        before = TeamPublic.model_validate(admin.get("/v1/teams/zeta").json())
        assert {f.source for f in before.settings.values()} == {"default"}
        assert list(before.settings) == list(SETTABLE)
        assert before.settings["max_concurrent_runs"].default_setting == (
            "TOKENBENCH__TEAMS__MAX_CONCURRENT_RUNS"
        )
        changed = admin.patch(
            "/v1/teams/zeta",
            json={"visibility": "team", "monthly_budget_usd": 250.5, "max_concurrent_runs": 2},
        )
        assert changed.status_code == 200, changed.text
        settings = changed.json()["settings"]
        assert settings["visibility"] == {
            "value": "team",
            "source": "team",
            "default_setting": "TOKENBENCH__TEAMS__VISIBILITY",
        }
        assert settings["monthly_budget_usd"]["value"] == 250.5
        assert settings["max_queued_runs"]["source"] == "default"
        reset = admin.patch("/v1/teams/zeta", json={"monthly_budget_usd": None}).json()
        assert reset["settings"]["monthly_budget_usd"] == {
            "value": None,
            "source": "default",
            "default_setting": "TOKENBENCH__TEAMS__MONTHLY_BUDGET_USD",
        }
        assert reset["settings"]["max_concurrent_runs"]["value"] == 2
        teams = [t["team"] for t in admin.get("/v1/teams").json()]
        assert {"default", "zeta"} <= set(teams)
        assert admin.get("/v1/teams/no-such-team").status_code == 404
        for bad in ({}, {"max_concurrent_runs": 0}, {"visibility": "public"}, {"x": 1}):
            assert admin.patch("/v1/teams/zeta", json=bad).status_code == 422, bad
        assert admin.patch("/v1/teams/Zeta", json={"visibility": "org"}).status_code == 422
        entries = admin.get("/v1/audit", params={"action": "team.update", "limit": 2}).json()
    newest = AuditEntry.model_validate(entries[0])
    assert newest.object_id == "zeta" and newest.outcome == "ok"
    assert newest.detail == {
        "changes": {"monthly_budget_usd": None},
        "before": {"monthly_budget_usd": 250.5},
    }
    assert entries[0]["seq"] > entries[1]["seq"]


def test_the_audit_filters(base: str) -> None:
    start = dt.datetime.now(dt.UTC)
    minted = mint(base, "eta", "viewer", name="filtered")
    with client(base) as admin:
        admin.post(f"/v1/tokens/{minted['id']}/revoke")
        recent = admin.get("/v1/audit", params={"since": start.isoformat()}).json()
        assert [e["action"] for e in recent[:2]] == ["token.revoke", "token.mint"]
        assert recent[1]["detail"]["team"] == "eta" and recent[1]["object_id"] == minted["id"]
        assert (
            admin.get(
                "/v1/audit",
                params={"until": start.isoformat(), "action": "token.revoke", "limit": 10000},
            ).status_code
            == 200
        )
        about = admin.get(
            "/v1/audit", params={"object_kind": "token", "object_id": minted["id"]}
        ).json()
        assert [e["action"] for e in about] == ["token.revoke", "token.mint"]
        early = admin.get("/v1/audit", params={"until": start.isoformat()}).json()
        assert all(e["object_id"] != minted["id"] for e in early)
        assert len(admin.get("/v1/audit", params={"limit": 1}).json()) == 1
        for bad in (
            {"limit": 10_001},
            {"limit": 0},
            {"team": "A"},
            {"token_id": "x"},
            {"object_id": "a b"},
            {"object_id": "x" * 257},
            {"outcome": "maybe"},
            {"since": "yesterday"},
        ):
            assert admin.get("/v1/audit", params=bad).status_code == 422, bad
        text = admin.get("/v1/audit", params={"limit": 10_000}).text
    assert minted["token"] not in text


def test_minting_stops_at_the_cap(redis_server: RedisServer, tmp_path: Path) -> None:
    with served(_app(redis_server.url, tmp_path / "cap.duckdb", max_tokens=2)) as url:
        mint(url, "theta", "viewer")
        mint(url, "theta", "viewer")
        with client(url) as admin:
            refused = admin.post("/v1/tokens", json={"team": "theta", "role": "viewer"})
            assert refused.status_code == 409
            assert "TOKENBENCH__TEAMS__MAX_TOKENS" in refused.json()["detail"]
            last = admin.get("/v1/audit", params={"limit": 1}).json()[0]
        assert (last["action"], last["outcome"]) == ("token.mint", "refused")


def test_a_bootstrap_token_is_not_revoked_over_rest(base: str) -> None:
    with client(base) as admin:
        me = admin.get("/v1/whoami").json()
        answer = admin.post(f"/v1/tokens/{me['token_id']}/revoke")
        assert answer.status_code == 422
        assert "TOKENBENCH__API__TOKENS" in answer.json()["detail"]
        assert admin.get("/v1/whoami").status_code == 200


def test_a_restart_loses_no_token_revocation_or_setting(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    db = tmp_path / "restart.duckdb"
    with served(_app(redis_server.url, db)) as url:
        kept = mint(url, "iota", "submitter", expires_in="30d", name="kept")
        gone = mint(url, "iota", "viewer")
        with client(url) as admin:
            assert admin.post(f"/v1/tokens/{gone['id']}/revoke").status_code == 200
            assert admin.patch("/v1/teams/iota", json={"max_schedules": 7}).status_code == 200
        with client(url, kept["token"]) as user:
            assert user.get("/v1/whoami").status_code == 200
    with served(_app(redis_server.url, db)) as url:
        with client(url, kept["token"]) as user:
            me = user.get("/v1/whoami").json()
        assert me["token_id"] == kept["id"] and me["name"] == "kept"
        assert dt.datetime.fromisoformat(me["expires_at"]) == dt.datetime.fromisoformat(
            kept["expires_at"]
        )
        with client(url, gone["token"]) as user:
            assert user.get("/v1/whoami").status_code == 401
        with client(url) as admin:
            row = admin.get(f"/v1/tokens/{kept['id']}").json()
            assert row["last_used_at"] is not None and row["state"] == "active"
            team = admin.get("/v1/teams/iota").json()["settings"]["max_schedules"]
            assert (team["value"], team["source"]) == (7, "team")
            actions = [e["action"] for e in admin.get("/v1/audit").json()]
        assert actions[:4] == ["team.update", "token.revoke", "token.mint", "token.mint"]
