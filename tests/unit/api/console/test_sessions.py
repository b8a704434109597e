"""The console's session store (bounded, idle expiry), the registry's check of a
session's token id, and the templates and static files shipped in the package."""

from __future__ import annotations

import datetime as dt
from importlib import resources

import duckdb

from analytics.store.db import migrate
from api.access.caller import Role
from api.access.tokens import TokenRegistry, bootstrap_id
from api.console.pages import ENV
from api.console.sessions import SessionStore


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_session_expires_when_idle_and_not_while_used() -> None:
    clock = Clock()
    store = SessionStore(idle_s=100, clock=clock)
    session = store.open("tok-1")
    for _ in range(5):
        clock.now += 90
        assert store.get(session.session_id) == session
    clock.now += 101
    assert store.get(session.session_id) is None
    assert store.get(session.session_id) is None  # dropped, not only refused


def test_the_store_is_bounded_least_recently_used_first() -> None:
    store = SessionStore(max_sessions=2)
    first, second = store.open("a"), store.open("b")
    assert store.get(first.session_id) is not None  # now the most recently used
    store.open("c")
    assert len(store) == 2
    assert store.get(second.session_id) is None
    assert store.get(first.session_id) is not None


def test_sessions_have_their_own_random_ids_and_csrf_tokens() -> None:
    store = SessionStore()
    one, two = store.open("a"), store.open("a")
    assert len({one.session_id, two.session_id, one.csrf, two.csrf}) == 4
    assert len(one.session_id) >= 43 and one.csrf_ok(one.csrf)
    assert not one.csrf_ok(two.csrf) and not one.csrf_ok(None) and not one.csrf_ok("")
    store.close(one.session_id)
    assert store.get(one.session_id) is None and store.get(None) is None


def test_caller_for_a_token_id_ends_with_revocation_and_expiry() -> None:
    con = duckdb.connect()
    migrate(con)
    registry = TokenRegistry(con, ["boot-secret-token"])
    _, record = registry.mint("red", Role.VIEWER, "v", None, None)
    caller = registry.caller_for(record.token_id)
    assert caller is not None and caller.team == "red" and caller.role is Role.VIEWER
    registry.revoke(record.token_id)
    assert registry.caller_for(record.token_id) is None
    soon = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    _, expiring = registry.mint("red", Role.VIEWER, "e", soon, None)
    assert registry.caller_for(expiring.token_id) is not None
    assert registry.caller_for(expiring.token_id, soon + dt.timedelta(seconds=1)) is None
    boot = registry.caller_for(bootstrap_id("boot-secret-token"))
    assert boot is not None and boot.is_admin and boot.bootstrap
    assert registry.caller_for("tok-000000000000") is None


def test_templates_and_static_files_ship_in_the_package() -> None:
    package = resources.files("api.console")
    for name in ("base.html", "login.html", "runs.html", "run.html", "error.html", "submit.html"):
        assert (package / "templates" / name).is_file(), name
    for name in ("console.css", "console.js"):
        assert (package / "static" / name).is_file(), name
    # Autoescape on for every template (user text is never trusted).
    assert ENV.from_string("{{ x }}").render(x="<b>") == "&lt;b&gt;"
    assert (
        ENV.get_template("error.html")
        .render(
            status=404,
            sentence="s",
            detail="<script>",
            caller=None,
            path="/",
            csrf=None,
            may_submit=False,
        )
        .count("&lt;script&gt;")
        == 1
    )
