"""The web console's sessions: in memory, bounded, ended by sign-out, idle time, or the
token behind them being revoked or expiring.

A session holds the *id* of the token it was opened with, never the token: every request
asks the :class:`~api.access.tokens.TokenRegistry` for that id's caller (a revoked or
expired token has none, and the session ends there). Its id is 256 random bits (the
``tb_session`` cookie); each session has a CSRF token of its own that every POST must
send back. At most ``max_sessions`` are kept; opening one more drops the one unused for
longest. They are per process: a restart signs everyone out.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

COOKIE = "tb_session"
DEFAULT_MAX_SESSIONS = 10_000
DEFAULT_IDLE_S = 12 * 3600.0


@dataclass(frozen=True, slots=True)
class Session:
    """One signed-in browser: the token's id and the CSRF token of its forms."""

    session_id: str
    token_id: str
    csrf: str

    def csrf_ok(self, offered: str | None) -> bool:
        """Whether ``offered`` is this session's CSRF token (constant-time)."""
        return offered is not None and hmac.compare_digest(offered, self.csrf)


class SessionStore:
    """Sessions by id, least recently used first."""

    def __init__(
        self,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        idle_s: float = DEFAULT_IDLE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_sessions = max_sessions
        self.idle_s = idle_s
        self.clock = clock
        self._lock = threading.Lock()
        self._sessions: OrderedDict[str, tuple[Session, float]] = OrderedDict()

    def open(self, token_id: str) -> Session:
        """A new session for the token ``token_id``."""
        session = Session(secrets.token_urlsafe(32), token_id, secrets.token_urlsafe(32))
        with self._lock:
            self._sessions[session.session_id] = (session, self.clock())
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
        return session

    def get(self, session_id: str | None) -> Session | None:
        """The live session ``session_id`` (its idle time restarts), or None."""
        if not session_id:
            return None
        now = self.clock()
        with self._lock:
            found = self._sessions.pop(session_id, None)
            if found is None:
                return None
            session, last = found
            if now - last > self.idle_s:
                return None  # idle too long: dropped
            self._sessions[session_id] = (session, now)
            return session

    def close(self, session_id: str | None) -> None:
        """End a session (sign-out, or its token no longer usable)."""
        if session_id:
            with self._lock:
                self._sessions.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._sessions)
