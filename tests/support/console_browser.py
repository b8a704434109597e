"""The web console in a real headless Chromium (tests/browser): where Chromium is, how
Playwright starts it, signing in, screenshots at the two widths, and small scenarios.

Playwright drives the system's Chromium (Debian's ``chromium``, which ``.ci/run``
installs) through ``executable_path``: Playwright's own browser downloads
(``playwright install``) are never used, so nothing is fetched at run time. Chromium runs
with name resolution cut except for loopback, as on a machine without a network: a page
that needed a CDN would not load its asset.

Screenshots go to ``tests/browser/artefacts/`` (git-ignored; ``TOKENBENCH_BROWSER_ARTEFACTS``
names another folder), one file per page and width: ``<page>-1280.png`` (1280×900) and
``<page>-390.png`` (390×844), full page.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import Page

REPO = Path(__file__).resolve().parent.parent.parent
ARTEFACTS = Path(
    os.environ.get("TOKENBENCH_BROWSER_ARTEFACTS") or REPO / "tests" / "browser" / "artefacts"
)
WIDE = (1280, 900)
NARROW = (390, 844)
CHROMIUM_ARGS = [
    "--no-sandbox",  # CI runs as root in a container, where Chromium's sandbox cannot start
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]
# Each wait on an element: generous for a loaded 2-core machine, far below a test's 60 s.
WAIT_MS = 20_000
# A run's end seen live on its page (the page polls every 2 s).
RUN_END_MS = 50_000
# The console's security headers (docs/console.md; the contract).
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
PAGE_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}
# The worker of the browser tests' stack serves this region (a name no other test uses).
REGION = "browser"
RUN_ID = re.compile(r"/runs/([^/?#]+)$")


def chromium_path() -> str | None:
    """The system Chromium (``TOKENBENCH_CHROMIUM`` overrides), or None."""
    return (
        os.environ.get("TOKENBENCH_CHROMIUM")
        or shutil.which("chromium")
        or shutil.which("chromium-browser")
    )


def sign_in(page: Page, token: str) -> None:
    """Sign in on /login with ``token`` (typed, then Enter, as a keyboard user would) and
    wait for the runs page."""
    page.goto("/login")
    page.locator("#token").fill(token)
    page.locator("#token").press("Enter")
    page.wait_for_url(re.compile(r"/runs$"))


def csrf_of(page: Page) -> str:
    """The CSRF token of the signed-in page (the sign-out form's hidden field)."""
    value = page.locator('#sign-out-form input[name="csrf"]').get_attribute("value")
    assert value, "no csrf field in #sign-out-form"
    return value


def run_id_of(page: Page) -> str:
    """The run id of a run page's URL."""
    found = RUN_ID.search(page.url.split("?")[0])
    assert found, page.url
    return found.group(1)


def shoot(page: Page, name: str) -> int:
    """Screenshots of the page as it is at 1280×900 and at 390×844 (full page), into
    :data:`ARTEFACTS`; returns the document's width at 390 px (``scrollWidth``: more than
    390 is a horizontal overflow). The viewport is left at 1280×900."""
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    narrow_width = 0
    for width, height in (WIDE, NARROW):
        page.set_viewport_size({"width": width, "height": height})
        # Layout at the new width is done once a frame has been drawn at it.
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => r(null)))")
        page.screenshot(path=str(ARTEFACTS / f"{name}-{width}.png"), full_page=True)
        if width == NARROW[0]:
            narrow_width = int(page.evaluate("document.documentElement.scrollWidth"))
    page.set_viewport_size({"width": WIDE[0], "height": WIDE[1]})
    return narrow_width


def tiny_scenario(name: str, requests: int = 4, **simulate: Any) -> dict[str, Any]:
    """A small scenario on the simulated provider, in the browser tests' region."""
    return {
        "name": name,
        "providers": [
            {
                "name": "sim",
                "kind": "simulated",
                "simulate": {"ttft_ms": 2, "itl_ms": 1, **simulate},
            }
        ],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 4},
                    "output_tokens": {"dist": "fixed", "value": 4},
                }
            ]
        },
        "load": {"concurrency": [1], "requests_per_level": requests},
        "regions": [REGION],
    }


def long_scenario(name: str) -> dict[str, Any]:
    """A run that goes on for minutes unless cancelled (slow simulated answers)."""
    return tiny_scenario(name, requests=2000, ttft_ms=300, itl_ms=50)
