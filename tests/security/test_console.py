"""The web console attacked as the REST API is: a hostile provider's error message, a
forged POST, a viewer or another team reaching for what is not theirs, a revoked token
still holding a session. Every answer carries the console's security headers.

The control plane runs in this process (tests/support/console.py): two teams, red
keeping its runs to itself, blue sharing its own, and a run whose provider answered
an error message with a script in it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from api.access.caller import Role
from api.console.pages import CSP
from api.local.redis_server import RedisServer
from tests.conftest import API_TOKEN
from tests.support.console import (
    BLUE_RUN,
    RED_RUN,
    XSS,
    XSS_RUN,
    ConsoleStack,
    console_stack,
    csrf_of,
)

pytestmark = pytest.mark.integration

ESCAPED = "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;"


@pytest.fixture(scope="module")
def stack(
    redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConsoleStack]:
    with console_stack(redis_server.url, tmp_path_factory.mktemp("console-sec"), API_TOKEN) as s:
        yield s


def _assert_headers(headers: object, page: bool = True) -> None:
    h = headers  # httpx Headers
    assert h["content-security-policy"] == CSP  # type: ignore[index]
    assert "'unsafe-inline'" not in CSP and "frame-ancestors 'none'" in CSP
    assert h["x-content-type-options"] == "nosniff"  # type: ignore[index]
    assert h["referrer-policy"] == "no-referrer"  # type: ignore[index]
    assert h["x-frame-options"] == "DENY"  # type: ignore[index]
    if page:
        assert h["cache-control"] == "no-store"  # type: ignore[index]


def test_provider_error_with_a_script_renders_as_text(stack: ConsoleStack) -> None:
    client = stack.sign_in("blue-viewer")
    page = client.get(f"/runs/{XSS_RUN}")
    assert page.status_code == 200
    assert ESCAPED in page.text
    assert XSS not in page.text and "<script>alert" not in page.text
    # Only the console's own script, from /static, and nothing inline.
    assert page.text.count("<script") == 1
    assert '<script src="/static/console.js" defer></script>' in page.text
    compared = client.get(f"/compare?a={BLUE_RUN}&b={XSS_RUN}")
    assert compared.status_code == 200 and XSS not in compared.text


def test_a_script_in_the_url_is_escaped_on_the_error_page(stack: ConsoleStack) -> None:
    client = stack.sign_in("blue-viewer")
    page = client.get("/runs/%3Cscript%3Ealert(1)%3C%2Fscript%3E")
    assert page.status_code == 404
    assert '<main id="error"' in page.text
    assert "<script>alert(1)" not in page.text
    assert "Traceback" not in page.text
    _assert_headers(page.headers)


def test_every_console_answer_has_the_security_headers(stack: ConsoleStack) -> None:
    stack.client.cookies.clear()
    _assert_headers(stack.client.get("/login").headers)
    _assert_headers(stack.client.get("/", follow_redirects=False).headers)
    _assert_headers(stack.client.get("/runs", follow_redirects=False).headers)
    _assert_headers(stack.client.get("/static/console.css").headers, page=False)
    client = stack.sign_in("admin")
    for path in ("/runs", "/runs/table", f"/runs/{BLUE_RUN}", f"/runs/{BLUE_RUN}/progress",
                 "/compare", "/submit", "/schedules", "/datasets", "/shadow", "/health",
                 "/no-such-page"):  # fmt: skip
        answer = client.get(path)
        assert answer.status_code in (200, 404), path
        _assert_headers(answer.headers)
    download = client.get(f"/runs/{BLUE_RUN}/download/csv")
    assert download.headers["content-disposition"].startswith("attachment")
    assert download.headers["x-content-type-options"] == "nosniff"


def test_the_api_keeps_its_json_errors(stack: ConsoleStack) -> None:
    stack.client.cookies.clear()
    answer = stack.client.get("/v1/runs")
    assert answer.status_code == 401
    assert answer.headers["content-type"].startswith("application/json")
    # A session cookie is no bearer token: the API does not accept it.
    client = stack.sign_in("admin")
    assert client.get("/v1/runs").status_code == 401


def test_session_cookie_is_httponly_and_strict(stack: ConsoleStack) -> None:
    stack.client.cookies.clear()
    page = stack.client.get("/login")
    answer = stack.client.post(
        "/login", data={"token": API_TOKEN, "csrf": csrf_of(page.text)}, follow_redirects=False
    )
    assert answer.status_code == 303 and answer.headers["location"] == "/runs"
    cookie = next(
        v
        for k, v in answer.headers.multi_items()
        if k == "set-cookie" and v.startswith("tb_session=")
    )
    lowered = cookie.lower()
    assert "httponly" in lowered and "samesite=strict" in lowered and "path=/" in lowered
    assert API_TOKEN not in cookie  # the session's id, never the token


def test_a_bad_token_is_a_401_page(stack: ConsoleStack) -> None:
    stack.client.cookies.clear()
    page = stack.client.get("/login")
    answer = stack.client.post("/login", data={"token": "tbk_nope", "csrf": csrf_of(page.text)})
    assert answer.status_code == 401
    assert 'id="login-error"' in answer.text
    assert "tb_session" not in stack.client.cookies


def test_posts_without_their_csrf_token_are_refused(stack: ConsoleStack) -> None:
    # Sign-in itself: without the sign-in form's own token (its cookie), refused.
    stack.client.cookies.clear()
    answer = stack.client.post("/login", data={"token": API_TOKEN, "csrf": "forged"})
    assert answer.status_code == 403 and "tb_session" not in stack.client.cookies
    client = stack.sign_in("blue-submitter")
    for path, data in (
        ("/logout", {}),
        ("/logout", {"csrf": "forged"}),
        (f"/runs/{BLUE_RUN}/cancel", {"csrf": "forged"}),
        ("/submit", {"scenario": "name: x", "action": "start"}),
    ):
        refused = client.post(path, data=data, follow_redirects=False)
        assert refused.status_code == 403, path
        assert '<main id="error"' in refused.text
        _assert_headers(refused.headers)
    # Still signed in: the forged sign-out did nothing.
    assert client.get("/runs", follow_redirects=False).status_code == 200


def test_a_viewer_can_neither_submit_nor_cancel(stack: ConsoleStack) -> None:
    client = stack.sign_in("blue-viewer")
    runs = client.get("/runs")
    assert 'href="/submit"' not in runs.text
    assert client.get("/submit").status_code == 403
    page = client.get(f"/runs/{BLUE_RUN}")
    csrf = csrf_of(page.text)
    assert 'id="cancel-form"' not in page.text
    submit = client.post("/submit", data={"csrf": csrf, "scenario": "name: x", "action": "start"})
    assert submit.status_code == 403
    cancel = client.post(f"/runs/{BLUE_RUN}/cancel", data={"csrf": csrf}, follow_redirects=False)
    assert cancel.status_code == 403


def test_another_teams_private_run_is_not_there(stack: ConsoleStack) -> None:
    client = stack.sign_in("blue-submitter")
    listed = client.get("/runs")
    assert RED_RUN not in listed.text and "red-secret" not in listed.text
    assert RED_RUN not in client.get("/runs/table").text
    assert RED_RUN not in client.get("/compare").text
    csrf = csrf_of(listed.text)
    for path in (f"/runs/{RED_RUN}", f"/runs/{RED_RUN}/progress",
                 f"/runs/{RED_RUN}/download/csv", f"/runs/{RED_RUN}/download/parquet",
                 f"/compare?a={BLUE_RUN}&b={RED_RUN}", f"/compare?a={RED_RUN}&b={BLUE_RUN}"):  # fmt: skip
        answer = client.get(path)
        assert answer.status_code == 404, path
        assert "red-secret" not in answer.text
    cancel = client.post(f"/runs/{RED_RUN}/cancel", data={"csrf": csrf}, follow_redirects=False)
    assert cancel.status_code == 404
    # Its own team reads it.
    red = stack.sign_in("red-viewer")
    assert RED_RUN in red.get("/runs").text
    assert red.get(f"/runs/{RED_RUN}").status_code == 200


def test_revoking_the_token_ends_its_session(stack: ConsoleStack) -> None:
    registry = stack.client.app.state.tokens  # type: ignore[attr-defined]
    token, record = registry.mint("blue", Role.SUBMITTER, "revoked-later", None, None)
    stack.tokens["revoked-later"] = token
    client = stack.sign_in("revoked-later")
    assert client.get("/runs", follow_redirects=False).status_code == 200
    assert registry.revoke(record.token_id) is not None
    gone = client.get("/runs", follow_redirects=False)
    assert gone.status_code == 303 and gone.headers["location"] == "/login"
    # The session is ended, not merely refused: the cookie opens nothing afterwards.
    assert client.get("/runs/table", follow_redirects=False).status_code == 303


def test_an_expired_or_revoked_token_cannot_sign_in(stack: ConsoleStack) -> None:
    for who in ("expired", "revoked"):
        stack.client.cookies.clear()
        page = stack.client.get("/login")
        answer = stack.client.post(
            "/login", data={"token": stack.tokens[who], "csrf": csrf_of(page.text)}
        )
        assert answer.status_code == 401, who


def test_static_files_are_only_the_package_s(stack: ConsoleStack, tmp_path: Path) -> None:
    assert stack.client.get("/static/../pages.py").status_code == 404
    assert stack.client.get("/static/%2e%2e/pages.py").status_code == 404
    js = stack.client.get("/static/console.js")
    assert js.status_code == 200 and "javascript" in js.headers["content-type"]
