"""Schedules end to end: a real `tokenbench serve`, a real worker, a real simulated endpoint.

A schedule firing every 2 s (the minimum interval lowered by its setting, as only tests
do) starts runs through the same path as POST /v1/runs; they finish, the trend shows
them; the endpoint is then restarted slower, and the next run is flagged as a TTFT
regression, the webhook (a real loopback receiver) gets it, and a fire that came while
the slow run still ran is recorded as skipped. A second control plane is stopped while
a daily schedule's fire falls due, restarted, and catches that fire up exactly once.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from api.local.redis_server import RedisServer, free_port
from tests.conftest import (
    API_TOKEN,
    CliResult,
    Proc,
    _spawn,
    start_control_plane,
    start_worker,
    wait_for_run,
)
from tests.fakes.catcher import Catcher

pytestmark = pytest.mark.integration

FAST_TTFT_MS = 20
SLOW_TTFT_MS = 200  # ten times slower: a regression however loaded the machine is
WAIT_S = 180.0


def _wait(what: str, check: Callable[[], Any], timeout_s: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.3)
    raise TimeoutError(f"{what} not seen within {timeout_s} s")


def _simulator(port: int, ttft_ms: int, log: Path) -> Proc:
    proc = _spawn(
        ["simulate", "--port", str(port), "--ttft-ms", str(ttft_ms), "--itl-ms", "1"],
        log,
        dict(os.environ),
    )

    def healthy() -> bool:
        assert proc.process.poll() is None, proc.text()
        try:
            return httpx.get(f"http://127.0.0.1:{port}/health", timeout=0.5).status_code == 200
        except httpx.HTTPError:
            return False

    _wait("simulated endpoint", healthy, 60)
    return proc


@pytest.fixture(scope="module")
def region(
    redis_server: RedisServer, worker_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A region of this module's own, served by one real worker process."""
    name = f"sched-{uuid.uuid4().hex[:6]}"
    log = tmp_path_factory.mktemp("sched-worker") / "worker.log"
    proc = start_worker(name, worker_env, log, redis_server.url)
    yield name
    proc.stop(3)


def _scenario_file(path: Path, port: int, region: str, requests: int) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "name": "nightly-sim",
                "providers": [
                    {
                        "name": "sim",
                        "kind": "openai",
                        "base_url": f"http://127.0.0.1:{port}/v1",
                        "model": "simulated",
                    }
                ],
                "workload": {
                    "mix": [
                        {
                            "prompt_tokens": {"dist": "fixed", "value": 8},
                            "output_tokens": {"dist": "fixed", "value": 4},
                        }
                    ]
                },
                "load": {"concurrency": [2], "requests_per_level": requests},
                "regions": [region],
            }
        )
    )
    return path


def _client(base: str) -> httpx.Client:
    return httpx.Client(base_url=base, headers={"authorization": f"Bearer {API_TOKEN}"}, timeout=30)


def _fires(client: httpx.Client, schedule_id: str) -> list[dict[str, Any]]:
    answer = client.get(f"/v1/schedules/{schedule_id}/runs", params={"limit": 1000})
    assert answer.status_code == 200, answer.text
    return list(reversed(answer.json()))  # oldest first


def _ended(client: httpx.Client, fire: dict[str, Any]) -> bool:
    view = client.get(f"/v1/runs/{fire['run_id']}").json()
    return bool(view["state"] != "running")


def test_a_schedule_fires_and_a_slowed_run_is_flagged_and_notified(
    worker_env: dict[str, str],
    region: str,
    tmp_path: Path,
    tokenbench: Callable[..., CliResult],
) -> None:
    sim_port = free_port()
    simulator = _simulator(sim_port, FAST_TTFT_MS, tmp_path / "sim-fast.log")
    receiver = Catcher().start()
    env = {**worker_env, "TOKENBENCH__SCHEDULES__MIN_INTERVAL_S": "1"}
    plane, base = start_control_plane(env, tmp_path / "plane.duckdb", tmp_path / "plane.log")
    cli_env = {**env, "TOKENBENCH_SERVER": base, "TOKENBENCH_TOKEN": API_TOKEN}
    try:
        scenario = _scenario_file(tmp_path / "nightly.yaml", sim_port, region, requests=40)
        created = tokenbench(
            "schedule", "create", "--scenario", str(scenario), "--cron", "*/2 * * * * *",
            "--name", "nightly", "--webhook", f"{receiver.url}/hook", env=cli_env,
        )  # fmt: skip
        assert created.code == 0, created.stderr
        schedule_id = created.stdout.strip()
        with _client(base) as client:
            # Fires every 2 s: wait for two runs that started and finished, then pause.
            _wait(
                "two finished runs",
                lambda: (
                    len([f for f in _fires(client, schedule_id) if f["run_state"] == "finished"])
                    >= 2
                ),
            )
            assert tokenbench("schedule", "pause", schedule_id, env=cli_env).code == 0
            started = [f for f in _fires(client, schedule_id) if f["outcome"] == "started"]
            _wait("the fast runs to end", lambda: all(_ended(client, f) for f in started))
            fast_runs = [f["run_id"] for f in started]

            # The provider got slower: same address, ten times the TTFT.
            simulator.stop()
            simulator = _simulator(sim_port, SLOW_TTFT_MS, tmp_path / "sim-slow.log")
            assert tokenbench("schedule", "resume", schedule_id, env=cli_env).code == 0
            slow = _wait(
                "a run of the slow endpoint, judged",
                lambda: next(
                    (
                        f
                        for f in _fires(client, schedule_id)
                        if f["outcome"] == "started"
                        and f["run_id"] not in fast_runs
                        and f["evaluated_at"] is not None
                    ),
                    None,
                ),
            )
            assert tokenbench("schedule", "pause", schedule_id, env=cli_env).code == 0
            notified = _wait(
                "the webhook's delivery",
                lambda: client.get(f"/v1/schedules/{schedule_id}").json()["last_webhook"],
            )
            _wait(
                "every run to be judged",
                lambda: all(
                    f["evaluated_at"] is not None
                    for f in _fires(client, schedule_id)
                    if f["outcome"] == "started"
                ),
            )
            fires = _fires(client, schedule_id)
            trend = client.get("/v1/trends", params={"schedule_id": schedule_id}).json()
            then = client.get(
                "/v1/trends", params={"schedule_id": schedule_id, "as_of": slow["run_id"]}
            ).json()
            shown = tokenbench("trend", "--schedule", schedule_id, env=cli_env)
    finally:
        plane.stop()
        simulator.stop()
        receiver.stop()

    # The slow run: its TTFT p50 regressed against the fast runs before it.
    flagged = {r["metric"]: r for r in slow["regressions"]}
    assert "ttft_p50_ms" in flagged, slow["regressions"]
    assert flagged["ttft_p50_ms"]["latest"] > flagged["ttft_p50_ms"]["band_high"]
    assert flagged["ttft_p50_ms"]["window_runs"] == min(len(fast_runs), 5)
    # A fire that fell while the slow run ran was skipped, and says why.
    skipped = [f for f in fires if f["outcome"] == "skipped"]
    assert any(slow["run_id"] in (f["message"] or "") for f in skipped), fires
    # The webhook got one small JSON naming the run and the metric; nothing else.
    assert notified["outcome"] == "delivered" and notified["status"] == 200
    # One notification per regressed run (later slow runs may regress too, e.g. in
    # throughput against a window that now holds a slow run), each a POST of one run.
    posts = [r for r in receiver.requests if r.path == "/hook"]
    bodies = {json.loads(p.body)["run_id"]: json.loads(p.body) for p in posts}
    assert len(bodies) == len(posts) and all(p.method == "POST" for p in posts)
    body = bodies[slow["run_id"]]
    assert body["event"] == "tokenbench.regression" and body["schedule_id"] == schedule_id
    assert "ttft_p50_ms" in {r["metric"] for r in body["regressions"]}
    assert not any(API_TOKEN in p.raw().decode(errors="replace") for p in posts)
    assert notified["run_id"] in bodies  # GET /v1/schedules/{id} shows the last delivery
    # The trend shows every run the schedule started, in order; judged as of the slow
    # run, its TTFT p50 is the regression the webhook was told about.
    ran = [f["run_id"] for f in fires if f["outcome"] == "started"]
    assert [r["run_id"] for r in trend["runs"]] == ran
    assert [r["run_id"] for r in then["runs"]][-1] == slow["run_id"]
    row = next(r for r in then["rows"] if r["metric"] == "ttft_p50_ms")
    assert row["regression"] is True and row["latest_run_id"] == slow["run_id"]
    assert row["latest"] >= SLOW_TTFT_MS > row["window_mean"]
    assert shown.code == 0 and "TTFT p50" in shown.stdout


def test_a_restarted_control_plane_keeps_its_schedules_and_catches_up_once(
    worker_env: dict[str, str],
    region: str,
    tmp_path: Path,
    tokenbench: Callable[..., CliResult],
    simulate_endpoint: Callable[..., str],
) -> None:
    url = simulate_endpoint(ttft_ms=FAST_TTFT_MS, itl_ms=1)
    port = int(url.removesuffix("/v1").rsplit(":", 1)[1])
    env = {**worker_env, "TOKENBENCH__SCHEDULES__MIN_INTERVAL_S": "1"}
    db, log = tmp_path / "plane.duckdb", tmp_path / "plane.log"
    plane, base = start_control_plane(env, db, log)
    cli_env = {**env, "TOKENBENCH_SERVER": base, "TOKENBENCH_TOKEN": API_TOKEN}
    # A daily schedule whose one fire of today falls while the control plane is down.
    due = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=25)).replace(microsecond=0)
    cron = f"{due.second} {due.minute} {due.hour} * * *"
    scenario = _scenario_file(tmp_path / "daily.yaml", port, region, requests=10)
    try:
        with _client(base) as client:
            stored = client.post(
                "/v1/scenarios",
                content=scenario.read_bytes(),
                headers={"content-type": "application/yaml"},
            )
            assert stored.status_code == 201, stored.text
            created = client.post(
                "/v1/schedules", json={"scenario_id": stored.json()["id"], "cron": cron}
            )
            assert created.status_code == 201, created.text
            schedule_id = created.json()["id"]
    finally:
        plane.stop()
    # Down until well after the fire was due.
    while dt.datetime.now(dt.UTC) < due + dt.timedelta(seconds=2):
        time.sleep(0.5)
    plane, base = start_control_plane(env, db, log.with_suffix(".again.log"))
    cli_env["TOKENBENCH_SERVER"] = base
    try:
        with _client(base) as client:
            kept = client.get("/v1/schedules").json()
            fire = _wait(
                "the catch-up run, judged",
                lambda: next(
                    (f for f in _fires(client, schedule_id) if f["evaluated_at"] is not None),
                    None,
                ),
            )
            run = wait_for_run(client, fire["run_id"])
            shown = tokenbench("schedule", "show", schedule_id, env=cli_env)
            fires = _fires(client, schedule_id)
    finally:
        plane.stop()
    assert [s["id"] for s in kept] == [schedule_id] and kept[0]["state"] == "active"
    assert kept[0]["cron"] == cron
    assert len(fires) == 1, fires  # once, not once per missed time
    assert fire["kind"] == "catch_up" and fire["outcome"] == "started"
    assert dt.datetime.fromisoformat(fire["scheduled_for"]) == due
    assert "1 fire(s) missed" in fire["message"]
    assert run["state"] == "finished"
    assert shown.code == 0 and "catch_up" in shown.stdout
