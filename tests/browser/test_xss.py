"""A provider's error message is the provider's text, not the console's markup: a loopback
server answers every chat request 500 with a ``<script>`` in its body, and the run's page
(and its embedded report, in whatever frame) shows that text as text; the script never
runs."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import ConsoleStack
from tests.fakes.catcher import Catcher
from tests.support.console_browser import shoot, tiny_scenario

pytestmark = pytest.mark.timeout(60, func_only=True)

PAYLOAD = "<script>window.__xss=1</script>"
IMG = '<img src=x onerror="window.__xss=2">'


@pytest.fixture
def hostile_provider() -> Iterator[Catcher]:
    """A loopback "provider" whose every chat answer is a 500 carrying markup."""
    server = Catcher().start()
    server.answer("/chat/completions", f"{PAYLOAD}{IMG}".encode(), 500, "text/html")
    yield server
    server.stop()


def test_a_provider_error_with_a_script_renders_as_text(
    signed_in: Callable[[str], Page], console_stack: ConsoleStack, hostile_provider: Catcher
) -> None:
    scenario = tiny_scenario("browser-xss", requests=2)
    scenario["providers"] = [
        {
            "name": "hostile",
            "kind": "openai",
            "base_url": f"{hostile_provider.url}/v1",
            "model": "m",
        }
    ]
    run_id = console_stack.start_run("blue-submitter", scenario)
    view = console_stack.wait_for_run(run_id)
    assert view["state"] in ("finished", "failed"), view
    page = signed_in("blue-viewer")
    page.goto(f"/runs/{run_id}")
    expect(page.locator("#run-title")).to_be_visible()
    frames = [page.main_frame, *page.main_frame.child_frames]
    shown = [f for f in frames if f.get_by_text("window.__xss=1", exact=False).count()]
    assert shown, "the provider's error message is not shown on the run page"
    expect(shown[0].get_by_text("window.__xss=1", exact=False).first).to_be_visible()
    for frame in frames:
        assert frame.evaluate("typeof window.__xss") == "undefined", frame.url
        # No element was made from the payload: it is text inside the page's own markup.
        assert (
            frame.evaluate(
                "[...document.querySelectorAll('script,img')].filter(e =>"
                " (e.textContent || '').includes('__xss') ||"
                " (e.getAttribute('onerror') || '').includes('__xss')).length"
            )
            == 0
        ), frame.url
    shoot(page, "run-xss-as-text")
    # The runs list, where the run's errors are summed, stays clean too.
    page.goto("/runs")
    expect(page.locator(f'#runs-table tr[data-run-id="{run_id}"]')).to_have_count(1)
    assert page.evaluate("typeof window.__xss") == "undefined"
