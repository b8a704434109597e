"""Who may do what, seen in Chromium: a viewer gets no submit or cancel controls and the
server refuses the POSTs anyway (with a valid session and CSRF token); another team's
private run is neither listed nor readable (404); a submitter of the run's team cancels it
from its page and sees it cancelled.

Runs here: team red keeps its results to itself, team blue shares them
(tests/support/teams.py). The long run is cancelled by the last test (or, if that fails,
over REST when the module ends), so it never holds the worker for later modules.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import ConsoleStack
from tests.support.console_browser import (
    RUN_END_MS,
    csrf_of,
    long_scenario,
    shoot,
    tiny_scenario,
)

pytestmark = pytest.mark.timeout(60, func_only=True)

GOING = re.compile(r"\b(running|queued|pending)\b", re.IGNORECASE)
RUNNING = re.compile(r"\brunning\b", re.IGNORECASE)
CANCELLED = re.compile(r"\bcancelled\b", re.IGNORECASE)


@pytest.fixture(scope="module")
def long_run(console_stack: ConsoleStack) -> Iterator[str]:
    """A run of team red's submitter that goes on until it is cancelled."""
    run_id = console_stack.start_run("red-submitter", long_scenario("browser-long"))
    yield run_id
    console_stack.rest("admin").post(f"/v1/runs/{run_id}/cancel")
    console_stack.wait_for_run(run_id)


@pytest.fixture(scope="module")
def finished_runs(console_stack: ConsoleStack) -> dict[str, str]:
    """A finished run of each team, by team."""
    runs = {
        team: console_stack.start_run(f"{team}-submitter", tiny_scenario(f"browser-{team}"))
        for team in ("red", "blue")
    }
    for run_id in runs.values():
        assert console_stack.wait_for_run(run_id)["state"] == "finished"
    return runs


def test_a_viewer_sees_no_submit_or_cancel_and_the_server_refuses_both(
    signed_in: Callable[[str], Page], long_run: str
) -> None:
    page = signed_in("red-viewer")
    expect(page.locator("#main-nav")).to_be_visible()
    expect(page.locator("#main-nav").get_by_role("link", name="Submit", exact=True)).to_have_count(
        0
    )
    page.goto(f"/runs/{long_run}")
    expect(page.locator("#run-state")).to_have_text(GOING)
    expect(page.locator("#run-title")).to_be_visible()
    assert page.locator("#cancel-run").count() == 0
    assert page.locator("#cancel-form").count() == 0
    assert page.locator("#start").count() == 0
    # The POSTs a forged form would send, with this viewer's session and CSRF token.
    csrf = csrf_of(page)
    cancel = page.request.post(f"/runs/{long_run}/cancel", form={"csrf": csrf}, max_redirects=0)
    assert cancel.status == 403, cancel.text()[:500]
    submit = page.request.post(
        "/submit",
        form={"csrf": csrf, "action": "start", "scenario": "name: x"},
        max_redirects=0,
    )
    assert submit.status == 403, submit.text()[:500]
    response = page.goto("/submit")
    assert response is not None and response.status == 403
    expect(page.locator("main#error")).to_be_visible()
    shoot(page, "viewer-submit-refused")
    # Still going: the refused cancel did nothing.
    page.goto(f"/runs/{long_run}")
    expect(page.locator("#run-state")).to_have_text(GOING)


def test_another_teams_private_run_is_not_listed_and_its_page_is_404(
    signed_in: Callable[[str], Page], finished_runs: dict[str, str]
) -> None:
    blue = signed_in("blue-submitter")
    blue.goto("/runs")
    expect(blue.locator(f'#runs-table tr[data-run-id="{finished_runs["blue"]}"]')).to_have_count(1)
    expect(blue.locator(f'#runs-table tr[data-run-id="{finished_runs["red"]}"]')).to_have_count(0)
    response = blue.goto(f"/runs/{finished_runs['red']}")
    assert response is not None and response.status == 404
    expect(blue.locator("main#error")).to_be_visible()
    assert "browser-red" not in blue.content()
    # Red reads both: blue's results are shared with the organisation.
    red = signed_in("red-viewer")
    red.goto("/runs")
    for run_id in finished_runs.values():
        expect(red.locator(f'#runs-table tr[data-run-id="{run_id}"]')).to_have_count(1)


def test_a_submitter_cancels_a_running_run_from_its_page(
    signed_in: Callable[[str], Page], console_stack: ConsoleStack, long_run: str
) -> None:
    page = signed_in("red-submitter")
    page.goto(f"/runs/{long_run}")
    expect(page.locator("#run-state")).to_have_text(RUNNING, timeout=RUN_END_MS)
    expect(page.locator("#progress tr.progress-row").first).to_be_visible(timeout=RUN_END_MS)
    shoot(page, "run-live")
    page.locator("#cancel-run").click()
    expect(page.locator("#run-state")).to_have_text(CANCELLED, timeout=RUN_END_MS)
    expect(page.locator("#cancel-run")).to_have_count(0)
    assert console_stack.wait_for_run(long_run, 30)["state"] == "cancelled"
    shoot(page, "run-cancelled")
