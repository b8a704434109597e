"""Signing in and out of the console in Chromium: the token exchanged for an HttpOnly,
SameSite=Strict session cookie, a bad or expired token refused on the login page, sign-out
ending the session on the server (the old cookie no longer works), a POST without the
CSRF token refused, and the security headers on every page."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import ConsoleStack
from tests.support.console_browser import PAGE_HEADERS, csrf_of, shoot, sign_in

pytestmark = pytest.mark.timeout(60, func_only=True)


def test_root_sends_a_stranger_to_the_login_page_with_a_labelled_token_field(
    page: Page,
) -> None:
    page.goto("/")
    page.wait_for_url(re.compile(r"/login$"))
    expect(page.get_by_label("API token")).to_be_visible()
    expect(page.locator("#token")).to_have_attribute("type", "password")
    expect(page.locator("#sign-in")).to_be_visible()
    assert shoot(page, "login") <= 390


@pytest.mark.parametrize("which", ["wrong", "expired", "revoked"])
def test_a_bad_token_stays_on_the_login_page_with_an_error(
    page: Page, console_stack: ConsoleStack, which: str
) -> None:
    token = "not-a-token-of-this-service" if which == "wrong" else console_stack.tokens[which]
    page.goto("/login")
    page.locator("#token").fill(token)
    with page.expect_response(lambda r: r.request.method == "POST") as posted:
        page.locator("#sign-in").click()
    assert posted.value.status == 401
    expect(page.locator("#login-error")).to_be_visible()
    assert not [c for c in page.context.cookies() if c["name"] == "tb_session"]
    if which == "wrong":
        shoot(page, "login-error")


def test_sign_in_sets_an_httponly_strict_cookie_and_root_goes_to_runs(
    page: Page, console_stack: ConsoleStack
) -> None:
    sign_in(page, console_stack.tokens["blue-viewer"])
    cookies = {c["name"]: c for c in page.context.cookies()}
    session = cookies["tb_session"]
    assert session["httpOnly"] is True
    assert session["sameSite"] == "Strict"
    assert session["path"] == "/"
    assert console_stack.tokens["blue-viewer"] not in session["value"]
    # The page's scripts cannot read the session.
    assert "tb_session" not in page.evaluate("document.cookie")
    page.goto("/")
    page.wait_for_url(re.compile(r"/runs$"))
    nav = page.locator("#main-nav")
    for label in ("Runs", "Compare", "Schedules", "Datasets", "Shadow", "Health"):
        expect(nav.get_by_role("link", name=label, exact=True)).to_be_visible()


def test_sign_out_ends_the_session_on_the_server(
    signed_in: Callable[[str], Page], new_page: Callable[[], Page]
) -> None:
    page = signed_in("blue-submitter")
    old = [c for c in page.context.cookies() if c["name"] == "tb_session"]
    page.locator("#sign-out").click()
    page.wait_for_url(re.compile(r"/login$"))
    page.goto("/runs")
    page.wait_for_url(re.compile(r"/login$"))
    # The cookie from before sign-out, replayed from another browser: no session.
    other = new_page()
    other.context.add_cookies(old)
    other.goto("/runs")
    other.wait_for_url(re.compile(r"/login$"))


def test_a_post_without_the_csrf_token_is_refused(signed_in: Callable[[str], Page]) -> None:
    page = signed_in("blue-submitter")
    token = csrf_of(page)
    assert token
    refused = page.request.post("/logout", form={"csrf": "forged"}, max_redirects=0)
    assert refused.status == 403, refused.text()[:500]
    missing = page.request.post("/logout", max_redirects=0)
    assert missing.status == 403
    # Still signed in: the refused POSTs changed nothing.
    page.goto("/runs")
    expect(page.locator("#runs-table, #runs-empty").first).to_be_visible()
    assert page.url.endswith("/runs")


@pytest.mark.parametrize("path", ["/login", "/runs", "/health", "/runs/no-such-run"])
def test_security_headers_on_console_pages(signed_in: Callable[[str], Page], path: str) -> None:
    page = signed_in("admin")
    if path == "/login":
        page.locator("#sign-out").click()
        page.wait_for_url(re.compile(r"/login$"))
    response = page.goto(path)
    assert response is not None
    if path == "/runs/no-such-run":
        assert response.status == 404
        expect(page.locator("main#error h1")).to_contain_text("404")
        assert "Traceback" not in page.content()
    headers = response.headers
    for name, value in PAGE_HEADERS.items():
        assert name in headers, f"{path}: no {name}"
        assert value in headers[name], f"{path}: {name}: {headers[name]}"
