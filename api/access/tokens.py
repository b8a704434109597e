"""API tokens: minted by an admin, stored only as a SHA-256, checked in constant time.

A minted token reads ``tbk_<token id>_<secret>``: the id (``tok-`` and 12 hex digits)
finds its row, the secret is 32 random bytes (URL-safe base64). Only the SHA-256 of the
whole token is stored; a token of 256 random bits needs no slow hash, since nothing
short of the token itself hashes to it. The bootstrap tokens of
``TOKENBENCH__API__TOKENS`` are admin tokens of team ``default`` whose id is derived from
their hash (``boot-`` and 12 hex digits), so the audit log can name them.

The registry keeps every token row in memory (the control plane is the only writer of
the database, so a mint or a revoke is seen by the next request) and writes
``last_used_at`` back at most once a minute per token. An unknown, malformed, expired
or revoked token gets the same answer (``None``) after the same work: one hash and one
constant-time comparison against a row, a dummy one when there is none.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import re
import secrets
import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace

import duckdb

from api.access.caller import DEFAULT_TEAM, Caller, Role

TOKEN_PREFIX = "tbk_"
_TOKEN = re.compile(r"^tbk_(tok-[0-9a-f]{12})_[A-Za-z0-9_-]{43}$")
LAST_USED_WRITE_S = 60.0
# Compared against when the offered token names no row, so the work is the same.
_DUMMY_SHA256 = hashlib.sha256(b"tokenbench: no such token").hexdigest()


def token_sha256(token: str) -> str:
    """Hex SHA-256 of a token, as stored."""
    return hashlib.sha256(token.encode()).hexdigest()


def bootstrap_id(token: str) -> str:
    """The audit id of a TOKENBENCH__API__TOKENS token (not reversible to it)."""
    return "boot-" + token_sha256(token)[:12]


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """A token's row: everything but the token."""

    token_id: str
    token_sha256: str
    team: str
    role: Role
    name: str | None
    created_at: dt.datetime
    created_by: str | None
    expires_at: dt.datetime | None
    revoked_at: dt.datetime | None
    last_used_at: dt.datetime | None

    def usable(self, now: dt.datetime) -> bool:
        """Neither revoked nor expired at ``now``."""
        if self.revoked_at is not None:
            return False
        return self.expires_at is None or now < self.expires_at

    def caller(self) -> Caller:
        """The caller this token makes."""
        return Caller(self.token_id, self.team, self.role, self.name)

    def public(self) -> dict[str, object]:
        """The row as listed: no hash."""
        return {
            "id": self.token_id,
            "team": self.team,
            "role": self.role.value,
            "name": self.name,
            "created_at": self.created_at,
            "created_by": self.created_by,
            "expires_at": self.expires_at,
            "revoked_at": self.revoked_at,
            "last_used_at": self.last_used_at,
        }


_COLUMNS = (
    "token_id, token_sha256, team, role, name, created_at, created_by, expires_at, "
    "revoked_at, last_used_at"
)


def _record(row: tuple[object, ...]) -> TokenRecord:
    return TokenRecord(
        token_id=str(row[0]),
        token_sha256=str(row[1]),
        team=str(row[2]),
        role=Role(str(row[3])),
        name=None if row[4] is None else str(row[4]),
        created_at=row[5],  # type: ignore[arg-type]
        created_by=None if row[6] is None else str(row[6]),
        expires_at=row[7],  # type: ignore[arg-type]
        revoked_at=row[8],  # type: ignore[arg-type]
        last_used_at=row[9],  # type: ignore[arg-type]
    )


def utcnow() -> dt.datetime:
    """Now, timezone-aware UTC."""
    return dt.datetime.now(dt.UTC)


class TokenRegistry:
    """Every token, in memory, written through to ``api_tokens`` on ``con``.

    ``con`` is the control plane's writer connection: methods are called on the event
    loop (authentication) or hold the registry's lock (mint, revoke) with a cursor."""

    def __init__(self, con: duckdb.DuckDBPyConnection, bootstrap: Iterable[str] = ()) -> None:
        self.con = con
        self._lock = threading.Lock()
        self._bootstrap = [token_sha256(token) for token in bootstrap]
        rows = con.execute(f"SELECT {_COLUMNS} FROM api_tokens").fetchall()  # noqa: S608
        self._tokens: dict[str, TokenRecord] = {r.token_id: r for r in map(_record, rows)}
        self._last_written: dict[str, float] = {}

    # ------------------------------------------------------------------ checking

    def authenticate(self, offered: str, now: dt.datetime | None = None) -> Caller | None:
        """The caller ``offered`` makes, or None (unknown, malformed, expired, revoked)."""
        now = now or utcnow()
        digest = token_sha256(offered)
        # Bootstrap tokens: compared against every one, without stopping early.
        matched = False
        for known in self._bootstrap:
            matched |= hmac.compare_digest(digest, known)
        if matched:
            return Caller("boot-" + digest[:12], DEFAULT_TEAM, Role.ADMIN, bootstrap=True)
        found = _TOKEN.match(offered)
        record = self._tokens.get(found.group(1)) if found else None
        expected = record.token_sha256 if record is not None else _DUMMY_SHA256
        if not hmac.compare_digest(digest, expected) or record is None:
            return None
        if not record.usable(now):
            return None
        self._touch(record, now)
        return record.caller()

    def _touch(self, record: TokenRecord, now: dt.datetime) -> None:
        """Record the use; written to the database at most once a minute per token."""
        self._tokens[record.token_id] = replace(record, last_used_at=now)
        last = self._last_written.get(record.token_id)
        stamp = now.timestamp()
        if last is not None and stamp - last < LAST_USED_WRITE_S:
            return
        self._last_written[record.token_id] = stamp
        self.con.execute(
            "UPDATE api_tokens SET last_used_at = ? WHERE token_id = ?", [now, record.token_id]
        )

    # ------------------------------------------------------------------ admin

    def mint(
        self,
        team: str,
        role: Role,
        name: str | None,
        expires_at: dt.datetime | None,
        created_by: str | None,
    ) -> tuple[str, TokenRecord]:
        """A new token and its row; the token is returned once and never stored."""
        token_id = "tok-" + secrets.token_hex(6)
        token = f"{TOKEN_PREFIX}{token_id}_{secrets.token_urlsafe(32)}"
        record = TokenRecord(
            token_id=token_id,
            token_sha256=token_sha256(token),
            team=team,
            role=role,
            name=name,
            created_at=utcnow(),
            created_by=created_by,
            expires_at=expires_at,
            revoked_at=None,
            last_used_at=None,
        )
        with self._lock:
            self.con.execute(
                f"INSERT INTO api_tokens ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",  # noqa: S608
                [
                    record.token_id,
                    record.token_sha256,
                    record.team,
                    record.role.value,
                    record.name,
                    record.created_at,
                    record.created_by,
                    record.expires_at,
                    None,
                    None,
                ],
            )
            self._tokens[token_id] = record
        return token, record

    def revoke(self, token_id: str) -> TokenRecord | None:
        """Revoke a token (effective on the next request); None if there is none."""
        with self._lock:
            record = self._tokens.get(token_id)
            if record is None:
                return None
            if record.revoked_at is None:
                record = replace(record, revoked_at=utcnow())
                self.con.execute(
                    "UPDATE api_tokens SET revoked_at = ? WHERE token_id = ?",
                    [record.revoked_at, token_id],
                )
                self._tokens[token_id] = record
            return record

    def caller_for(self, token_id: str, now: dt.datetime | None = None) -> Caller | None:
        """The caller of the token ``token_id`` if it is still usable (a bootstrap token
        always is), else None: the web console's sessions hold a token's id, never the
        token, and ask this on every request so a revoke or an expiry ends them."""
        for digest in self._bootstrap:
            if token_id == "boot-" + digest[:12]:
                return Caller(token_id, DEFAULT_TEAM, Role.ADMIN, bootstrap=True)
        record = self._tokens.get(token_id)
        if record is None or not record.usable(now or utcnow()):
            return None
        return record.caller()

    def get(self, token_id: str) -> TokenRecord | None:
        """A token's row."""
        return self._tokens.get(token_id)

    def listed(self, team: str | None = None) -> list[TokenRecord]:
        """Every token (of ``team``), newest first."""
        rows = [r for r in self._tokens.values() if team is None or r.team == team]
        return sorted(rows, key=lambda r: r.created_at, reverse=True)
