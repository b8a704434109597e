"""The web console end to end in a real headless Chromium (Playwright on the system's
Chromium): a control plane, a worker and Redis as `tokenbench serve` runs them, two teams.

Team **red** keeps its results to itself, team **blue** shares them (tests/support/teams.py
mints a viewer and a submitter token of each into the database before the control plane
starts); the bootstrap token is the admin. The whole directory is one xdist group
(tests/support/tiers.py): one stack and one Chromium for all its tests, on one worker.
Without a Chromium every test here is skipped, before anything is started.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from api.local.redis_server import start_redis_server
from tests.conftest import API_TOKEN, Proc, start_control_plane, start_worker
from tests.support.console_browser import (
    CHROMIUM_ARGS,
    REGION,
    WAIT_MS,
    WIDE,
    chromium_path,
    sign_in,
)
from tests.support.polls import wait_for_view
from tests.support.teams import mint_team_tokens

# Waits on elements (expect): a loaded 2-core machine answers well within this.
expect.set_options(timeout=WAIT_MS)


@pytest.fixture(scope="session", autouse=True)
def chromium() -> str:
    """The system Chromium's path; skips every browser test when there is none, before
    any service is started."""
    path = chromium_path()
    if path is None:
        pytest.skip("no chromium binary on PATH (.ci/run installs Debian's chromium)")
    return path


@dataclass
class ConsoleStack:
    """The service the console is part of, and REST clients to seed it, one per caller
    (``admin``, ``red-viewer``, ``red-submitter``, ``blue-viewer``, ``blue-submitter``)."""

    base: str
    tokens: dict[str, str]
    plane: Proc
    worker: Proc
    db: Path
    clients: dict[str, httpx.Client] = field(default_factory=dict)

    def rest(self, caller: str) -> httpx.Client:
        """A REST client with ``caller``'s token."""
        if caller not in self.clients:
            self.clients[caller] = httpx.Client(
                base_url=self.base,
                headers={"authorization": f"Bearer {self.tokens[caller]}"},
                timeout=30,
            )
        return self.clients[caller]

    def start_run(self, caller: str, scenario: dict[str, Any]) -> str:
        """Start a run of ``scenario`` over REST as ``caller``; its id."""
        answer = self.rest(caller).post("/v1/runs", json={"scenario": scenario})
        assert answer.status_code == 201, answer.text
        return str(answer.json()["id"])

    def wait_for_run(self, run_id: str, timeout_s: float = 90) -> dict[str, Any]:
        """The run's view (as admin) once it ended."""
        return wait_for_view(
            self.rest("admin"),
            run_id,
            lambda view: view.get("state") not in ("pending", "running", "queued"),
            timeout_s,
        )

    def close(self) -> None:
        """Close the REST clients."""
        for client in self.clients.values():
            client.close()


@pytest.fixture(scope="session")
def console_stack(
    chromium: str,
    worker_env: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ConsoleStack]:
    """A worker (region ``browser``) and a control plane whose database holds the two
    teams' tokens, on a Redis of their own: the stack lives for the session, and other
    tests on the same xdist worker may leave the session's Redis without its state."""
    tmp = tmp_path_factory.mktemp("console")
    db = tmp / "console.duckdb"
    tokens = mint_team_tokens(db, API_TOKEN)
    own = start_redis_server()
    env = {**worker_env, "TOKENBENCH__REDIS__URL": own.url}
    try:
        worker = start_worker(REGION, env, tmp / "worker-browser.log", own.url)
        try:
            plane, base = start_control_plane(env, db, tmp / "api-console.log")
        except BaseException:
            worker.stop(3)
            raise
        stack = ConsoleStack(base, tokens, plane, worker, db)
        yield stack
        stack.close()
        plane.stop()
        worker.stop(3)
    finally:
        own.stop()


@pytest.fixture
def browser(chromium: str) -> Iterator[Browser]:
    """A headless Chromium for one test. Not one for the session: Playwright's sync API
    runs an asyncio loop on the test's thread for as long as it is started, and the other
    tests a worker process runs next (``asyncio.run``, anyio, uvloop) fail on a loop that
    is already running. Started and stopped per test, it leaves no loop behind."""
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@dataclass
class PageProblems:
    """What went wrong inside a page: uncaught script errors and CSP violations."""

    errors: list[str] = field(default_factory=list)


@pytest.fixture
def new_page(browser: Browser, console_stack: ConsoleStack) -> Iterator[Callable[[], Page]]:
    """Factory of fresh pages, each in a context of its own (own cookies), at 1280×900 on
    the console's base URL. After the test, no page may have had an uncaught script
    error or a Content-Security-Policy violation."""
    contexts = []
    problems = PageProblems()

    def make() -> Page:
        context = browser.new_context(
            base_url=console_stack.base,
            viewport={"width": WIDE[0], "height": WIDE[1]},
            timezone_id="Europe/Paris",
            locale="en-GB",
        )
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        page.on("pageerror", lambda error: problems.errors.append(f"pageerror: {error}"))
        page.on(
            "console",
            lambda message: (
                problems.errors.append(f"console: {message.text}")
                if message.type == "error" and "Content Security Policy" in message.text
                else None
            ),
        )
        page.on("dialog", lambda dialog: dialog.accept())  # a "really cancel?" confirm
        return page

    yield make
    for context in contexts:
        with contextlib.suppress(Exception):
            context.close()
    assert not problems.errors, "\n".join(problems.errors)


@pytest.fixture
def page(new_page: Callable[[], Page]) -> Page:
    """A fresh page, signed in as nobody."""
    return new_page()


@pytest.fixture
def signed_in(new_page: Callable[[], Page], console_stack: ConsoleStack) -> Callable[[str], Page]:
    """Factory: a fresh page signed in as a caller (``admin``, ``red-viewer`` ...)."""

    def make(caller: str) -> Page:
        page = new_page()
        sign_in(page, console_stack.tokens[caller])
        return page

    return make
