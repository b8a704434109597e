"""The web console's pages over a real control plane (in this process, on the session's
Redis): sign-in and out, the runs list and its live fragment, a finished run's report
and downloads, a comparison, the submit form (problems at their line, a dry run's plan,
a start, a cancel), and the other pages' empty states."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from api.local.redis_server import RedisServer
from scenarios.wire.contract import region_queue
from tests.conftest import API_TOKEN, start_control_plane
from tests.support.console import BLUE_RUN, XSS_RUN, ConsoleStack, console_stack, csrf_of
from tests.support.polls import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack(
    redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConsoleStack]:
    with console_stack(redis_server.url, tmp_path_factory.mktemp("console"), API_TOKEN) as s:
        yield s


def _scenario_yaml(region: str, provider_url: str = "") -> str:
    extra = f"\n    base_url: {provider_url}" if provider_url else ""
    return f"""name: console-submit
providers:
  - name: sim
    kind: simulated{extra}
workload:
  mix:
    - prompt_tokens: {{dist: fixed, value: 4}}
      output_tokens: {{dist: fixed, value: 2}}
load:
  concurrency: [1]
  requests_per_level: 2
regions: [{region}]
"""


def test_root_sign_in_and_sign_out(stack: ConsoleStack) -> None:
    stack.client.cookies.clear()
    assert stack.client.get("/", follow_redirects=False).headers["location"] == "/login"
    login = stack.client.get("/login")
    for needle in (
        'id="login-form"',
        'id="token"',
        'type="password"',
        'id="sign-in"',
        ">API token<",
    ):
        assert needle in login.text
    client = stack.sign_in("admin")
    assert client.get("/", follow_redirects=False).headers["location"] == "/runs"
    runs = client.get("/runs")
    assert 'id="sign-out-form"' in runs.text and 'id="main-nav"' in runs.text
    for label in ("Runs", "Compare", "Submit", "Schedules", "Datasets", "Shadow", "Health"):
        assert f">{label}</a>" in runs.text
    out = client.post("/logout", data={"csrf": csrf_of(runs.text)}, follow_redirects=False)
    assert out.status_code == 303 and out.headers["location"] == "/login"
    assert client.get("/runs", follow_redirects=False).headers["location"] == "/login"


def test_runs_list_and_its_fragment(stack: ConsoleStack) -> None:
    client = stack.sign_in("blue-viewer")
    page = client.get("/runs")
    assert 'id="runs-table"' in page.text and 'id="runs-filter"' in page.text
    assert f'<tr data-run-id="{BLUE_RUN}" data-state="finished">' in page.text
    assert re.search(
        r'<td class="created"><time datetime="[0-9T:-]+Z" title="[^"]+ UTC">', page.text
    )
    assert 'class="run-link" href="/runs/' in page.text
    fragment = client.get("/runs/table")
    assert fragment.text.lstrip().startswith('<tbody id="runs-body">') and BLUE_RUN in fragment.text
    searched = client.get("/runs", params={"q": "xss"})
    assert XSS_RUN in searched.text and f'data-run-id="{BLUE_RUN}"' not in searched.text
    empty = client.get("/runs", params={"state": "queued"})
    assert 'id="runs-empty" class="empty">' in empty.text


def test_a_finished_run_shows_its_report_and_downloads(stack: ConsoleStack) -> None:
    client = stack.sign_in("blue-viewer")
    page = client.get(f"/runs/{BLUE_RUN}")
    assert '<h1 id="run-title">' in page.text and '<span id="run-state"' in page.text
    assert '<div id="report">' in page.text and '<section data-section="summary"' in page.text
    assert 'class="progress-row"' in page.text and " ms</td>" in page.text
    assert '<pre id="scenario">' in page.text and "blue-shared" in page.text
    for kind in ("parquet", "csv", "html", "markdown", "json"):
        assert f'data-download="{kind}" href="/runs/{BLUE_RUN}/download/{kind}"' in page.text
    parquet = client.get(f"/runs/{BLUE_RUN}/download/parquet")
    assert parquet.status_code == 200 and parquet.content[:4] == b"PAR1"
    report = client.get(f"/runs/{BLUE_RUN}/download/json")
    assert report.json()["run_id"] == BLUE_RUN
    html = client.get(f"/runs/{BLUE_RUN}/download/html")
    # The report's own sandboxed CSP, not the console's: its charts' inline scripts run
    # in an opaque origin.
    assert html.headers["content-security-policy"].startswith("sandbox")
    assert client.get(f"/runs/{BLUE_RUN}/download/exe").status_code == 404


def test_compare_two_runs(stack: ConsoleStack) -> None:
    client = stack.sign_in("blue-viewer")
    form = client.get("/compare")
    assert (
        'id="compare-form"' in form.text and 'id="run-a"' in form.text and 'id="run-b"' in form.text
    )
    page = client.get("/compare", params={"a": BLUE_RUN, "b": XSS_RUN})
    assert page.status_code == 200
    assert '<div id="verdict"' in page.text
    assert '<section data-section="comparison"' in page.text
    within = client.get("/compare", params={"run": XSS_RUN, "providers": "sim,alt"})
    assert within.status_code == 200
    assert "provider alt against sim" in within.text
    assert '<section data-section="comparison"' in within.text
    unknown = client.get("/compare", params={"run": XSS_RUN, "providers": "sim,<b>x</b>"})
    assert unknown.status_code in (404, 422) and "<b>x</b>" not in unknown.text


def test_submit_validates_dry_runs_starts_and_cancels(
    stack: ConsoleStack, redis_server: RedisServer
) -> None:
    client = stack.sign_in("blue-submitter")
    form = client.get("/submit")
    csrf = csrf_of(form.text)
    for needle in (
        'id="submit-form"',
        'id="scenario-text"',
        'id="scenario-file"',
        'id="validate"',
        'id="dry-run"',
        'id="start"',
    ):
        assert needle in form.text
    region = f"console-nowhere-{uuid.uuid4().hex[:8]}"
    bad = _scenario_yaml(region).replace("requests_per_level: 2", "requests_per_level: -3")
    answer = client.post("/submit", data={"csrf": csrf, "scenario": bad, "action": "validate"})
    assert answer.status_code == 422
    assert '<li data-path="load.requests_per_level"' in answer.text and "(line 11)" in answer.text
    broken = client.post(
        "/submit", data={"csrf": csrf, "scenario": "name: [", "action": "validate"}
    )
    assert broken.status_code == 422 and 'id="problems"' in broken.text
    good = _scenario_yaml(region)
    valid = client.post("/submit", data={"csrf": csrf, "scenario": good, "action": "validate"})
    assert valid.status_code == 200 and "The scenario is valid." in valid.text
    # No worker in the region: refused unless the run may wait for one.
    refused = client.post("/submit", data={"csrf": csrf, "scenario": good, "action": "dry_run"})
    assert refused.status_code == 409 and region in refused.text
    wait = {"csrf": csrf, "scenario": good, "wait_for_workers": "on"}
    plan = client.post("/submit", data={**wait, "action": "dry_run"})
    assert plan.status_code == 200 and '<div id="plan"' in plan.text and "Cost bound" in plan.text
    try:
        started = client.post("/submit", data={**wait, "action": "start"}, follow_redirects=False)
        assert started.status_code == 303
        run_page = client.get(started.headers["location"])
        assert 'id="cancel-form"' in run_page.text and 'data-poll="/runs/' in run_page.text
        run_id = started.headers["location"].rsplit("/", 1)[1]
        progress = client.get(f"/runs/{run_id}/progress")
        assert progress.text.lstrip().startswith('<div id="progress"')
        cancelled = client.post(f"/runs/{run_id}/cancel", data={"csrf": csrf_of(run_page.text)})
        assert cancelled.status_code == 200  # back on the run's page
        wait_until(
            lambda: 'data-state="cancelled"' in client.get(f"/runs/{run_id}/progress").text,
            30,
            "the run cancelled",
        )
        assert 'id="cancel-form"' not in client.get(f"/runs/{run_id}").text
    finally:
        leftover = redis.Redis.from_url(redis_server.url)
        for key in leftover.scan_iter(match=f"{region_queue(region)}*"):
            leftover.delete(key)
        leftover.close()


def test_the_other_pages_say_what_to_do_when_empty(stack: ConsoleStack) -> None:
    client = stack.sign_in("red-viewer")
    for path in ("/schedules", "/datasets", "/shadow", "/answers"):
        page = client.get(path)
        assert page.status_code == 200 and '<p class="empty">' in page.text, path
    health = client.get("/health")
    assert 'id="health-redis">reachable' in health.text
    assert 'id="health-duckdb">writable' in health.text
    assert 'id="queue-depth"' in health.text
    for path in ("/schedules/nope", "/datasets/nope", "/shadow/nope"):
        assert client.get(path).status_code == 404, path


def test_tokenbench_serve_serves_the_console(worker_env: dict[str, str], tmp_path: Path) -> None:
    """The installed package's templates and static files, from a real `tokenbench serve`."""
    proc, base = start_control_plane(worker_env, tmp_path / "serve.duckdb", tmp_path / "serve.log")
    try:
        with httpx.Client(base_url=base, timeout=30) as client:
            assert client.get("/").headers["location"] == "/login"
            login = client.get("/login")
            assert 'id="login-form"' in login.text
            assert client.get("/static/console.js").status_code == 200
            answer = client.post("/login", data={"token": API_TOKEN, "csrf": csrf_of(login.text)})
            assert answer.status_code == 303 and "tb_session" in client.cookies
            runs = client.get("/runs")
            assert runs.status_code == 200 and 'id="runs-table"' in runs.text
            assert 'id="runs-empty" class="empty">' in runs.text
    finally:
        proc.stop()


def test_a_schedule_page_pauses_and_resumes(stack: ConsoleStack) -> None:
    # Created over REST by blue's submitter (a yearly cron: it never fires here).
    bearer = {"authorization": f"Bearer {stack.tokens['blue-submitter']}"}
    stack.client.cookies.clear()
    scenario = stack.client.post("/v1/scenarios", json=_scenario_yaml_data(), headers=bearer)
    assert scenario.status_code == 201, scenario.text
    body = {"scenario_id": scenario.json()["id"], "cron": "0 0 1 1 *", "name": "nightly"}
    created = stack.client.post("/v1/schedules", json=body, headers=bearer)
    assert created.status_code == 201, created.text
    schedule_id = created.json()["id"]
    viewer = stack.sign_in("blue-viewer")
    listed = viewer.get("/schedules")
    assert f'data-schedule-id="{schedule_id}"' in listed.text and "nightly" in listed.text
    page = viewer.get(f"/schedules/{schedule_id}")
    assert page.status_code == 200 and 'id="pause-form"' not in page.text  # a viewer
    refused = viewer.post(f"/schedules/{schedule_id}/pause", data={"csrf": csrf_of(page.text)})
    assert refused.status_code == 403
    client = stack.sign_in("blue-submitter")
    page = client.get(f"/schedules/{schedule_id}")
    assert 'id="pause-form"' in page.text and "No finished run yet" in page.text
    paused = client.post(f"/schedules/{schedule_id}/pause", data={"csrf": csrf_of(page.text)})
    assert paused.status_code == 200 and 'id="resume-form"' in paused.text
    assert 'id="schedule-state" class="badge">paused' in paused.text
    resumed = client.post(f"/schedules/{schedule_id}/resume", data={"csrf": csrf_of(paused.text)})
    assert 'id="pause-form"' in resumed.text
    # Red's submitter may read it (blue shares) but not change it.
    red = stack.sign_in("red-submitter")
    page = red.get(f"/schedules/{schedule_id}")
    assert page.status_code == 200
    other = red.post(f"/schedules/{schedule_id}/pause", data={"csrf": csrf_of(page.text)})
    assert other.status_code == 403


def _scenario_yaml_data() -> dict[str, object]:
    return {
        "name": "console-schedule",
        "providers": [{"name": "sim", "kind": "simulated"}],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 4},
                    "output_tokens": {"dist": "fixed", "value": 2},
                }
            ]
        },
        "load": {"concurrency": [1], "requests_per_level": 2},
        "regions": [f"console-nowhere-{uuid.uuid4().hex[:8]}"],
    }
