"""API tokens on a real `tokenbench serve`, over real HTTP: nothing can be replayed as a
token, every bad token is the same 401, and no role mints above itself.

- **Hashes only at rest.** After tokens of every role are minted, used, refused and
  revoked, no token (nor its secret part) is in the DuckDB file's bytes (WAL too) or in
  any table, in any Redis key or value, in the server's log, in any audit entry, or in
  any answer but the one mint answer that shows it; a token's SHA-256 is in
  ``api_tokens.token_sha256`` and nowhere else.
- **One 401.** A revoked, an expired, an unknown, a malformed and a missing token get
  byte-for-byte the same 401 (body and ``WWW-Authenticate``), so a caller cannot tell a
  revoked token from one that never existed.
- **No privilege escalation.** A submitter (or viewer) mints nothing, an admin token
  least of all, and changes no team; its own role is what it was.
- **Admins are organisation-wide** (docs/teams.md, "Tokens and roles"): an admin minted
  for team A mints and revokes team B's tokens and changes team B's settings. There is
  no per-team admin; a team that must not be administered by another team's people
  gets no admin token of its own, and the organisation's admins are the few who hold
  admin tokens.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
import redis

from api.access.tokens import token_sha256
from api.local.redis_server import RedisServer
from tests.conftest import API_TOKEN, Proc, start_control_plane

pytestmark = pytest.mark.integration

# Routes each token is tried on: its own identity, lists, and an admin's routes.
TRIED = ["/v1/whoami", "/v1/tokens", "/v1/teams", "/v1/audit", "/v1/runs", "/v1/schedules"]


class Plane:
    """A control plane process and every answer it gave (but the mint answers)."""

    def __init__(self, proc: Proc, base: str, db: Path) -> None:
        self.proc = proc
        self.base = base
        self.db = db
        self.answers: list[bytes] = []

    def call(self, method: str, path: str, token: str | None, **kwargs: Any) -> httpx.Response:
        """One request with ``token``; its answer is kept for the scans."""
        headers = {"authorization": f"Bearer {token}"} if token else {}
        answer = httpx.request(method, self.base + path, headers=headers, timeout=30, **kwargs)
        self.answers.append(_raw(answer))
        return answer

    def mint(self, team: str, role: str, by: str = API_TOKEN, **extra: Any) -> tuple[str, str]:
        """A token minted by ``by``: (token, id). Its answer is the one not scanned."""
        answer = httpx.post(
            f"{self.base}/v1/tokens",
            json={"team": team, "role": role, **extra},
            headers={"authorization": f"Bearer {by}"},
            timeout=30,
        )
        assert answer.status_code == 201, answer.text
        return answer.json()["token"], answer.json()["id"]


def _raw(answer: httpx.Response) -> bytes:
    headers = "\n".join(f"{k}: {v}" for k, v in answer.headers.items())
    return headers.encode() + b"\n\n" + answer.content


@pytest.fixture
def plane(worker_env: dict[str, str], tmp_path: Path) -> Iterator[Plane]:
    """A control plane of this test's own (its own DuckDB file and log)."""
    proc, base = start_control_plane(worker_env, tmp_path / "api.duckdb", tmp_path / "api.log")
    yield Plane(proc, base, tmp_path / "api.duckdb")
    proc.stop()


def _same_401(answers: list[httpx.Response]) -> None:
    first = answers[0]
    for answer in answers:
        assert answer.status_code == 401
        assert answer.content == first.content
        assert answer.headers["www-authenticate"] == first.headers["www-authenticate"] == "Bearer"


def test_every_bad_token_gets_the_same_401(plane: Plane) -> None:
    revoked, revoked_id = plane.mint("one", "admin")
    assert plane.call("GET", "/v1/whoami", revoked).status_code == 200
    assert plane.call("POST", f"/v1/tokens/{revoked_id}/revoke", API_TOKEN).status_code == 200
    soon = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=2)
    expired, _ = plane.mint("one", "viewer", expires_at=soon.isoformat())
    deadline = time.monotonic() + 30
    while plane.call("GET", "/v1/whoami", expired).status_code == 200:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    # Unknown: a well-formed token of an id that exists, with another secret, and of one
    # that does not; malformed; the bootstrap token with a byte changed; none at all.
    forged = f"tbk_{revoked_id}_" + "B" * 43
    bad = [
        revoked,
        expired,
        forged,
        "tbk_tok-000000000000_" + "A" * 43,
        "not-a-token",
        API_TOKEN[:-1] + "X",
        None,
    ]
    for path in ("/v1/whoami", "/v1/tokens", "/v1/audit", "/v1/runs"):
        _same_401([plane.call("GET", path, token) for token in bad])
    _same_401(
        [plane.call("POST", "/v1/tokens", t, json={"team": "x", "role": "admin"}) for t in bad]
    )


def test_no_role_mints_above_itself_and_admins_are_org_wide(plane: Plane) -> None:
    submitter, submitter_id = plane.mint("team-a", "submitter")
    viewer, _ = plane.mint("team-a", "viewer")
    for token in (submitter, viewer):
        for role in ("admin", "submitter", "viewer"):
            for team in ("team-a", "team-b", "default"):
                answer = plane.call("POST", "/v1/tokens", token, json={"team": team, "role": role})
                assert answer.status_code == 403, answer.text
        changed = plane.call("PATCH", "/v1/teams/team-a", token, json={"max_concurrent_runs": 999})
        assert changed.status_code == 403
        assert plane.call("POST", f"/v1/tokens/{submitter_id}/revoke", token).status_code == 403
    assert plane.call("GET", "/v1/whoami", submitter).json()["role"] == "submitter"
    listed = plane.call("GET", "/v1/tokens", API_TOKEN).json()
    assert sorted(t["role"] for t in listed) == ["submitter", "viewer"]
    settings = plane.call("GET", "/v1/teams/team-a", API_TOKEN).json()["settings"]
    assert settings["max_concurrent_runs"]["source"] == "default"

    # Admins are organisation-wide: team A's admin administers team B.
    admin_a, _ = plane.mint("team-a", "admin")
    theirs, theirs_id = plane.mint("team-b", "submitter", by=admin_a)
    assert plane.call("GET", "/v1/whoami", theirs).json()["team"] == "team-b"
    patched = plane.call("PATCH", "/v1/teams/team-b", admin_a, json={"visibility": "team"})
    assert patched.status_code == 200
    assert plane.call("POST", f"/v1/tokens/{theirs_id}/revoke", admin_a).status_code == 200
    assert plane.call("GET", "/v1/whoami", theirs).status_code == 401
    entries = plane.call("GET", "/v1/audit", admin_a, params={"team": "team-a"}).json()
    assert {e["action"] for e in entries} >= {"token.mint", "token.revoke", "team.update"}


def test_tokens_are_nowhere_but_their_mint_answer(plane: Plane, redis_server: RedisServer) -> None:
    tokens: list[str] = []
    for team, role in (("red", "viewer"), ("red", "submitter"), ("blue", "admin")):
        token, _ = plane.mint(team, role, name=f"{team} {role}", expires_in="1d")
        tokens.append(token)
    admin = tokens[2]
    # An admin minted by a minted admin, then revoked.
    fourth, fourth_id = plane.mint("blue", "viewer", by=admin)
    tokens.append(fourth)
    for token in tokens:
        for path in TRIED:
            plane.call("GET", path, token)
        plane.call("POST", "/v1/tokens", token, json={"team": "red", "role": "admin"})
        plane.call("PATCH", "/v1/teams/red", token, json={"max_schedules": 3})
    plane.call("POST", f"/v1/tokens/{fourth_id}/revoke", admin)
    plane.call("GET", "/v1/whoami", fourth)
    hashes = [token_sha256(t) for t in [*tokens, API_TOKEN]]
    # A stored hash is not a token: offered as one, it is refused like any other.
    for digest in hashes:
        assert plane.call("GET", "/v1/whoami", digest).status_code == 401
    audit = plane.call("GET", "/v1/audit", API_TOKEN, params={"limit": 10_000})
    # 5 mints, a revoke, a team change; 3 refused mints and 3 refused changes.
    assert len(audit.json()) == 13
    # What may not leak: each token, its secret part, and its SHA-256 outside api_tokens.
    # The secret is everything after "tbk_<id>_": urlsafe base64 may itself hold "_".
    parts = [t.split("_", 2)[2] for t in tokens]
    assert all(len(part) == 43 for part in parts)
    secrets = [*tokens, *parts, API_TOKEN]

    def leaks(data: bytes, also_hashes: bool = True) -> list[str]:
        found = [s[:12] for s in secrets if s.encode() in data]
        if also_hashes:
            found += [f"sha256 {h[:8]}" for h in hashes if h.encode() in data]
        return found

    assert leaks(tokens[0].encode()) and leaks(hashes[0].encode())  # the detector looks
    for answer in plane.answers:
        assert not leaks(answer), answer[:500]

    keys = redis.Redis.from_url(redis_server.url)
    try:
        for key in keys.scan_iter(count=1000):
            dumped = keys.dump(key) or b""
            assert not leaks(key + b" " + dumped), key
    finally:
        keys.close()

    plane.proc.stop()
    assert not leaks(plane.proc.log.read_bytes())
    for path in plane.db.parent.glob(plane.db.name + "*"):  # the file and any WAL
        # The file holds the hashes, by design (api_tokens); never a token.
        assert not leaks(path.read_bytes(), also_hashes=False), path
    con = duckdb.connect(str(plane.db), read_only=True)
    try:
        tables = con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'"
        ).fetchall()
        assert ("api_tokens",) in tables and ("audit_log",) in tables
        for (table,) in tables:
            for row in con.execute(f'SELECT * FROM "{table}"').fetchall():
                text = repr(row).encode()
                assert not leaks(text, also_hashes=table != "api_tokens"), (table, row)
        stored = {r[0] for r in con.execute("SELECT token_sha256 FROM api_tokens").fetchall()}
    finally:
        con.close()
    # The four above, and the admin token the blue admin minted in the loop.
    assert set(hashes[:4]) <= stored and len(stored) == 5
