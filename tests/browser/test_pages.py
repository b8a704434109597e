"""Every console page in Chromium at 1280×900 and 390×844: it loads (200), has the nav
and the sign-out form, a user of a phone-sized screen never scrolls sideways
(``scrollWidth`` ≤ 390), and its screenshots are written (tests/support/console_browser.py).
A list with nothing in it says what to do next; the objects listed link to their pages."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import ConsoleStack
from tests.support.console_browser import NARROW, shoot, tiny_scenario
from tests.support.teams import NDJSON, gateway_config

pytestmark = pytest.mark.timeout(60, func_only=True)


@dataclass
class Seeded:
    """Objects of team blue, one of each kind the console lists."""

    schedule: str
    dataset: str
    session: str
    run: str


@pytest.fixture(scope="module")
def seeded(console_stack: ConsoleStack) -> Seeded:
    """A schedule (yearly: it never fires here), a dataset, a shadow session (in a
    region no worker serves: it waits, nothing is sent) and a finished run."""
    client = console_stack.rest("blue-submitter")
    stored = client.post("/v1/scenarios", json=tiny_scenario("browser-scheduled"))
    assert stored.status_code == 201, stored.text
    schedule = client.post(
        "/v1/schedules",
        json={"scenario_id": stored.json()["id"], "cron": "0 0 1 1 *", "name": "browser-yearly"},
    )
    assert schedule.status_code == 201, schedule.text
    rows = "".join(json.dumps({"prompt": f"prompt {i}"}) + "\n" for i in range(5))
    dataset = client.post(
        "/v1/datasets?name=browser-prompts.jsonl", content=rows.encode(), headers=NDJSON
    )
    assert dataset.status_code == 201, dataset.text
    session = client.post(
        "/v1/shadow-sessions",
        json={"config": gateway_config("browser-session"), "wait_for_workers": True},
    )
    assert session.status_code == 201, session.text
    run = console_stack.start_run("blue-submitter", tiny_scenario("browser-pages"))
    assert console_stack.wait_for_run(run)["state"] == "finished"
    return Seeded(schedule.json()["id"], dataset.json()["id"], session.json()["id"], run)


def _visit(page: Page, path: str, name: str, overflow: dict[str, int]) -> None:
    response = page.goto(path)
    assert response is not None and response.status == 200, (
        f"{path}: {response and response.status}"
    )
    expect(page.locator("#main-nav")).to_be_visible()
    expect(page.locator("#sign-out-form")).to_have_count(1)
    assert "Traceback" not in page.content()
    width = shoot(page, name)
    if width > NARROW[0]:
        overflow[path] = width


def test_every_page_at_both_widths(signed_in: Callable[[str], Page], seeded: Seeded) -> None:
    page = signed_in("blue-submitter")
    overflow: dict[str, int] = {}
    pages = [
        ("/runs", "runs"),
        (f"/runs/{seeded.run}", "run-finished-small"),
        ("/submit", "submit"),
        ("/schedules", "schedules"),
        (f"/schedules/{seeded.schedule}", "schedule"),
        ("/datasets", "datasets"),
        (f"/datasets/{seeded.dataset}", "dataset"),
        ("/shadow", "shadow"),
        (f"/shadow/{seeded.session}", "shadow-session"),
        ("/health", "health"),
    ]
    for path, name in pages:
        _visit(page, path, name, overflow)
    assert not overflow, f"wider than {NARROW[0]} px at {NARROW[0]} px: {overflow}"


def test_lists_link_to_their_objects(signed_in: Callable[[str], Page], seeded: Seeded) -> None:
    page = signed_in("blue-viewer")
    for path, object_id in (
        ("/schedules", seeded.schedule),
        ("/datasets", seeded.dataset),
        ("/shadow", seeded.session),
    ):
        page.goto(path)
        expect(page.locator(f'main a[href$="/{object_id}"]').first).to_be_visible()


def test_the_schedule_page_pauses_and_resumes(
    signed_in: Callable[[str], Page], seeded: Seeded
) -> None:
    page = signed_in("blue-submitter")
    page.goto(f"/schedules/{seeded.schedule}")
    page.locator("#pause-form button").click()
    expect(page.locator("#resume-form")).to_be_visible()
    page.locator("#resume-form button").click()
    expect(page.locator("#pause-form")).to_be_visible()


def test_health_shows_the_worker_region(signed_in: Callable[[str], Page]) -> None:
    page = signed_in("blue-viewer")
    page.goto("/health")
    expect(page.get_by_text("browser", exact=True).first).to_be_visible()


def test_empty_lists_say_what_to_do_next(
    signed_in: Callable[[str], Page], console_stack: ConsoleStack
) -> None:
    # Team red's viewer: red has no schedule, dataset or session; blue's are shared,
    # so only a filter on nothing leaves the runs list empty.
    page = signed_in("red-viewer")
    page.goto("/runs?q=no-such-scenario-anywhere")
    expect(page.locator("#runs-empty")).to_be_visible()
    assert page.locator("#runs-empty").inner_text().strip()
    shoot(page, "runs-empty")
