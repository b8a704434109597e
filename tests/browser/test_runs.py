"""A run through the console in Chromium: submitted on the submit page, watched to its
end on its own page without a reload, its report and downloads, then two runs compared;
and the submit page's problems and dry-run plan."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import ConsoleStack
from tests.support.console_browser import (
    RUN_END_MS,
    run_id_of,
    shoot,
    tiny_scenario,
)
from tests.support.polls import wait_until

pytestmark = pytest.mark.timeout(60, func_only=True)

FINISHED = re.compile(r"\bfinished\b", re.IGNORECASE)
DOWNLOADS = ("parquet", "csv", "html", "markdown", "json")


def test_submit_a_scenario_and_watch_it_finish_live(
    signed_in: Callable[[str], Page],
) -> None:
    page = signed_in("blue-submitter")
    page.get_by_role("link", name="Submit", exact=True).click()
    page.wait_for_url(re.compile(r"/submit$"))
    # Slow enough answers that the run is still going when its page first loads.
    scenario = tiny_scenario("browser-live", requests=40, ttft_ms=120, itl_ms=20)
    page.locator("#scenario-text").fill(json.dumps(scenario, indent=2))
    page.locator("#start").click()
    page.wait_for_url(re.compile(r"/runs/[^/]+$"))
    run_id = run_id_of(page)
    expect(page.locator("#run-title")).to_be_visible()
    first_state = page.locator("#run-state").inner_text()
    assert not FINISHED.search(first_state), f"already {first_state!r}: nothing seen live"
    expect(page.locator("#progress tr.progress-row").first).to_be_visible(timeout=RUN_END_MS)
    # Live: the progress (with #run-state in it) is replaced by the page's polling while
    # the page itself stays (a reload would drop the mark).
    page.evaluate(
        "window.__tbKept = 'kept'; window.__tbProgress = document.getElementById('progress')"
    )
    # Polled from here: wait_for_function's predicate would be an eval the CSP refuses.
    wait_until(
        lambda: page.evaluate(
            "window.__tbKept === 'kept' && document.getElementById('progress') !== window.__tbProgress"
        ),
        RUN_END_MS / 1000,
        "the progress replaced without a reload",
    )
    if not FINISHED.search(page.locator("#run-state").inner_text()):
        shoot(page, "run-live-submitted")
    # Its end shows without anyone reloading (the console may reload by itself to show
    # the report: docs/console.md).
    expect(page.locator("#run-state")).to_have_text(FINISHED, timeout=RUN_END_MS)
    report = page.locator("#report section[data-section]")
    expect(report.first).to_be_visible()
    assert report.count() >= 2, report.count()
    assert page.locator("#cancel-run").count() == 0  # nothing to cancel any more
    expect(page.locator("pre#scenario")).to_contain_text("browser-live")
    for kind in DOWNLOADS:
        link = page.locator(f'a[data-download="{kind}"]')
        expect(link).to_have_count(1)
        href = link.get_attribute("href")
        assert href, kind
        fetched = page.request.get(href)
        assert fetched.status == 200, f"{kind}: {fetched.status} {href}"
        assert fetched.body(), kind
    shoot(page, "run-finished")
    # The runs list shows it, finished, with a link to its page.
    page.get_by_role("link", name="Runs", exact=True).first.click()
    row = page.locator(f'#runs-table tr[data-run-id="{run_id}"]')
    expect(row).to_have_attribute("data-state", "finished")
    expect(row.locator("td.scenario")).to_contain_text("browser-live")
    expect(row.locator("td.team")).to_contain_text("blue")
    expect(row.locator("td.created time[datetime]")).to_have_count(1)
    expect(row.locator("a.run-link")).to_have_attribute("href", re.compile(f"/runs/{run_id}$"))


def test_the_runs_list_picks_up_a_new_run_without_a_reload(
    signed_in: Callable[[str], Page], console_stack: ConsoleStack
) -> None:
    page = signed_in("blue-viewer")
    expect(page.locator("#runs-table, #runs-empty").first).to_be_visible()
    page.evaluate("window.__tbKept = 'kept'")
    run_id = console_stack.start_run("blue-submitter", tiny_scenario("browser-list"))
    row = page.locator(f'#runs-table tr[data-run-id="{run_id}"]')
    expect(row).to_have_count(1, timeout=RUN_END_MS)
    expect(row).to_have_attribute("data-state", "finished", timeout=RUN_END_MS)
    assert page.evaluate("window.__tbKept") == "kept"
    # The filter: a search that matches nothing leaves no row of it.
    page.locator('#runs-filter input[name="q"]').fill("no-such-scenario-anywhere")
    page.locator('#runs-filter input[name="q"]').press("Enter")
    expect(row).to_have_count(0)
    shoot(page, "runs-filtered")


def test_compare_two_runs(signed_in: Callable[[str], Page], console_stack: ConsoleStack) -> None:
    runs = [
        console_stack.start_run("blue-submitter", tiny_scenario("browser-compare", ttft_ms=ttft))
        for ttft in (2, 20)
    ]
    for run_id in runs:
        assert console_stack.wait_for_run(run_id)["state"] == "finished"
    page = signed_in("blue-viewer")
    page.get_by_role("link", name="Compare", exact=True).click()
    page.wait_for_url(re.compile(r"/compare"))
    page.locator("#run-a").select_option(runs[0])
    page.locator("#run-b").select_option(runs[1])
    page.locator("#compare").click()
    page.wait_for_url(re.compile(r"/compare\?"))
    expect(page.locator("#verdict")).to_be_visible()
    assert page.locator("#verdict").inner_text().strip()
    assert runs[0] in page.url and runs[1] in page.url
    assert shoot(page, "compare") <= 390


def test_submit_shows_problems_at_their_field_and_a_dry_run_plan(
    signed_in: Callable[[str], Page],
) -> None:
    page = signed_in("blue-submitter")
    page.goto("/submit")
    bad = tiny_scenario("browser-bad")
    bad["providers"] = [
        {"name": "meta", "kind": "openai", "model": "m", "base_url": "http://169.254.169.254/v1"}
    ]
    page.locator("#scenario-text").fill(json.dumps(bad, indent=2))
    page.locator("#validate").click()
    problem = page.locator('#problems li[data-path="providers.0.base_url"]')
    expect(problem).to_be_visible()
    expect(page.locator("#scenario-text")).to_have_value(re.compile("169.254.169.254"))
    assert shoot(page, "submit-problems") <= 390
    page.locator("#scenario-text").fill(json.dumps(tiny_scenario("browser-plan"), indent=2))
    page.locator("#dry-run").click()
    expect(page.locator("#plan")).to_be_visible()
    expect(page.locator("#problems li")).to_have_count(0)
    shoot(page, "submit-plan")
