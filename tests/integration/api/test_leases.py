"""Endpoint leases and queued runs (docs/teams.md) with real parts: `tokenbench serve`, a
worker process, and two standalone simulated endpoints on loopback as the targets.

Two runs on one target run back to back (the second ``queued``, and their records' time
spans do not overlap); on two targets they run at once; ``shared: true`` runs overlap and
their reports name each other; a queued run can be cancelled; a control-plane restart
keeps a queued run queued, and it starts once its target is free; a team's concurrency
quota queues its run while another team's run goes on.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest

from analytics.store.db import connect
from api.access.caller import Role
from api.access.teams import TeamStore
from api.access.tokens import TokenRegistry
from scenarios.settings import TeamSettings
from tests.conftest import (
    API_TOKEN,
    CliResult,
    Proc,
    start_control_plane,
    start_worker,
    wait_for_run,
)
from tests.support.polls import wait_for_view, wait_until

pytestmark = pytest.mark.integration

REGION = "leases"


@dataclass
class LeaseStack:
    """The control plane, its worker, the two targets and a client per team."""

    base: str
    db: Path
    log: Path
    env: dict[str, str]
    plane: Proc
    target_a: str
    target_b: str
    tokens: dict[str, str]

    def client(self, team: str = "default") -> httpx.Client:
        token = API_TOKEN if team == "default" else self.tokens[team]
        return httpx.Client(
            base_url=self.base, headers={"authorization": f"Bearer {token}"}, timeout=30
        )

    def restart(self) -> None:
        self.plane.stop()
        self.plane, self.base = start_control_plane(self.env, self.db, self.log)


def openai_scenario(
    base_url: str, *, requests: int = 12, shared: bool = False, name: str = "lease"
) -> dict[str, Any]:
    """A run against a loopback simulated endpoint as an OpenAI-compatible target."""
    provider: dict[str, Any] = {"name": "target", "kind": "openai", "base_url": base_url}
    provider["model"] = "m"
    if shared:
        provider["shared"] = True
    return {
        "name": name,
        "providers": [provider],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 8},
                    "output_tokens": {"dist": "fixed", "value": 8},
                }
            ]
        },
        "load": {"concurrency": [1], "requests_per_level": requests},
        "regions": [REGION],
    }


def simulated_scenario(requests: int = 40) -> dict[str, Any]:
    """A run on the worker's own simulator: no target, so only team quotas apply."""
    return {
        "name": "quota",
        "providers": [{"name": "sim", "kind": "simulated", "simulate": {"ttft_ms": 30}}],
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


def mint(db: Path, teams: dict[str, Role]) -> dict[str, str]:
    """Tokens for ``teams``, written to the database before the control plane opens it;
    team ``tight`` may run one run at once and queue one."""
    con = connect(db)
    try:
        registry = TokenRegistry(con)
        tokens = {
            team: registry.mint(team, role, team, None, None)[0] for team, role in teams.items()
        }
        TeamStore(con, TeamSettings()).update(
            "tight", {"max_concurrent_runs": 1, "max_queued_runs": 1}
        )
    finally:
        con.close()
    return tokens


@pytest.fixture(scope="module")
def stack(
    worker_env: dict[str, str],
    redis_server: Any,
    simulate_endpoint: Callable[..., str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[LeaseStack]:
    tmp = tmp_path_factory.mktemp("leases")
    worker = start_worker(REGION, worker_env, tmp / "worker.log", redis_server.url)
    target_a = simulate_endpoint(ttft_ms=40, itl_ms=5)
    target_b = simulate_endpoint(ttft_ms=40, itl_ms=5)
    db = tmp / "api.duckdb"
    tokens = mint(db, {"red": Role.SUBMITTER, "blue": Role.SUBMITTER, "tight": Role.SUBMITTER})
    env = {
        **worker_env,
        "TOKENBENCH__TEAMS__MAX_CONCURRENT_RUNS": "4",
        "TOKENBENCH__SCHEDULES__MIN_INTERVAL_S": "1",
    }
    plane, base = start_control_plane(env, db, tmp / "api.log")
    stack = LeaseStack(base, db, tmp / "api.log", env, plane, target_a, target_b, tokens)
    yield stack
    stack.plane.stop()
    worker.stop(3)


def submit(client: httpx.Client, scenario: dict[str, Any]) -> dict[str, Any]:
    created = client.post("/v1/runs", json={"scenario": scenario})
    assert created.status_code == 201, created.text
    return dict(created.json())


def span(client: httpx.Client, run_id: str) -> tuple[dt.datetime, dt.datetime]:
    """First request sent and last request ended, from the run's records."""
    answer = client.get(
        f"/v1/runs/{run_id}/records", headers={"accept": "application/vnd.apache.arrow.stream"}
    )
    assert answer.status_code == 200, answer.text
    table = pa.ipc.open_stream(answer.content).read_all()
    assert table.num_rows > 0
    sent = table.column("sent_at").to_pylist()
    ended = table.column("end_at").to_pylist()
    return min(s for s in sent if s), max(e for e in ended if e)


def test_two_runs_on_one_target_run_back_to_back(stack: LeaseStack) -> None:
    with stack.client() as client:
        first = submit(client, openai_scenario(stack.target_a, requests=20))
        second = submit(client, openai_scenario(stack.target_a, requests=4))
        assert first["state"] == "running"
        assert second["state"] == "queued", second
        assert second["queue"]["position"] == 1
        assert second["queue"]["waiting_for"] == [first["id"]]
        view = client.get(f"/v1/runs/{second['id']}").json()
        assert view["state"] == "queued" and view["queue"]["waiting_for"] == [first["id"]]
        listed = {run["id"]: run["state"] for run in client.get("/v1/runs").json()}
        assert listed[second["id"]] in ("queued", "running", "finished")
        assert wait_for_run(client, first["id"])["state"] == "finished"
        assert wait_for_run(client, second["id"])["state"] == "finished"
        first_span, second_span = span(client, first["id"]), span(client, second["id"])
    assert first_span[1] <= second_span[0], (first_span, second_span)


def test_runs_on_two_targets_run_at_once(stack: LeaseStack) -> None:
    with stack.client() as client:
        on_a = submit(client, openai_scenario(stack.target_a))
        on_b = submit(client, openai_scenario(stack.target_b))
        assert (on_a["state"], on_b["state"]) == ("running", "running")
        assert wait_for_run(client, on_a["id"])["state"] == "finished"
        assert wait_for_run(client, on_b["id"])["state"] == "finished"
        a, b = span(client, on_a["id"]), span(client, on_b["id"])
    assert max(a[0], b[0]) < min(a[1], b[1]), (a, b)  # their spans overlap


def test_shared_runs_overlap_and_their_reports_say_so(stack: LeaseStack) -> None:
    with stack.client() as client:
        one = submit(client, openai_scenario(stack.target_a, shared=True))
        two = submit(client, openai_scenario(stack.target_a, shared=True))
        assert (one["state"], two["state"]) == ("running", "running")
        # A run that wants the target alone waits for both.
        alone = submit(client, openai_scenario(stack.target_a, requests=2))
        assert alone["state"] == "queued"
        assert set(alone["queue"]["waiting_for"]) == {one["id"], two["id"]}
        for run in (one, two, alone):
            assert wait_for_run(client, run["id"])["state"] == "finished"
        report = client.get(f"/v1/runs/{one['id']}/report").json()
        markdown = client.get(f"/v1/runs/{two['id']}/report", params={"format": "markdown"})
        a, b = span(client, one["id"]), span(client, two["id"])
    assert max(a[0], b[0]) < min(a[1], b[1]), (a, b)
    assert [r["run_id"] for r in report["shared_overlaps"]] == [two["id"]]
    assert "Shared endpoints" in markdown.text and one["id"] in markdown.text


def test_a_queued_run_is_cancelled_out_of_the_queue(stack: LeaseStack) -> None:
    with stack.client() as client:
        first = submit(client, openai_scenario(stack.target_a, requests=10))
        second = submit(client, openai_scenario(stack.target_a))
        assert second["state"] == "queued"
        cancelled = client.post(f"/v1/runs/{second['id']}/cancel")
        assert cancelled.status_code == 202, cancelled.text
        assert cancelled.json()["state"] == "cancelled"
        assert wait_for_run(client, first["id"])["state"] == "finished"
        view = client.get(f"/v1/runs/{second['id']}").json()
    assert view["state"] == "cancelled" and view["requests_done"] == 0


def test_team_quota_queues_and_one_team_never_blocks_another(stack: LeaseStack) -> None:
    with stack.client("tight") as tight, stack.client("red") as red, stack.client("blue") as blue:
        going = submit(tight, simulated_scenario())
        waiting = submit(tight, simulated_scenario(requests=2))
        assert waiting["state"] == "queued"
        assert "max_concurrent_runs" in waiting["queue"]["reason"]
        assert waiting["queue"]["waiting_for"] == [going["id"]]
        refused = tight.post("/v1/runs", json={"scenario": simulated_scenario(requests=2)})
        assert refused.status_code == 429, refused.text
        assert refused.json()["quota"] == "max_queued_runs"
        assert "max_queued_runs" in refused.json()["detail"]
        assert refused.json()["setting"] == "team tight's max_queued_runs (tokenbench teams set)"
        # Team red queues on target A behind its own run; blue on target B starts at once,
        # and so does red's run on B: tight's queue and red's on A hold back neither.
        red_a = submit(red, openai_scenario(stack.target_a, requests=10))
        red_a_next = submit(red, openai_scenario(stack.target_a, requests=2))
        blue_b = submit(blue, openai_scenario(stack.target_b, requests=2))
        assert (red_a_next["state"], blue_b["state"]) == ("queued", "running")
        for client, run in ((tight, going), (tight, waiting), (red, red_a), (red, red_a_next)):
            assert wait_for_run(client, run["id"])["state"] == "finished"
        assert wait_for_run(blue, blue_b["id"])["state"] == "finished"


def test_submit_wait_says_where_its_run_waits(
    stack: LeaseStack, tokenbench: Callable[..., CliResult], tmp_path: Path
) -> None:
    path = tmp_path / "second.json"
    path.write_text(json.dumps(openai_scenario(stack.target_a, requests=2)))
    with stack.client() as client:
        # Long enough to outlast the command's start; cancelled once the second is queued.
        first = submit(client, openai_scenario(stack.target_a, requests=2000))

        def cancel_when_queued() -> None:
            wait_until(
                lambda: any(r["state"] == "queued" for r in client.get("/v1/runs").json()),
                120,
                "the command's run queued",
            )
            client.post(f"/v1/runs/{first['id']}/cancel")

        canceller = threading.Thread(target=cancel_when_queued)
        canceller.start()
        env = {**os.environ, "TOKENBENCH_TOKEN": API_TOKEN}
        done = tokenbench("submit", str(path), "--server", stack.base, "--wait", env=env)
        canceller.join()
        assert done.code == 0, done.stderr
        said = " ".join(done.stderr.split())  # the console wraps long lines
        assert f"queued: position 1, waiting for {first['id']}" in said
        assert wait_for_run(client, first["id"])["state"] == "cancelled"


def test_a_schedule_whose_target_is_busy_queues_its_run(stack: LeaseStack) -> None:
    with stack.client() as client:
        busy = submit(client, openai_scenario(stack.target_b, requests=2000))
        stored = client.post("/v1/scenarios", json=openai_scenario(stack.target_b, requests=2))
        assert stored.status_code == 201, stored.text
        body = {"scenario_id": stored.json()["id"], "cron": "*/2 * * * * *"}
        schedule = client.post("/v1/schedules", json=body).json()
        fires: list[dict[str, Any]] = []

        def fired_twice() -> bool:
            fires[:] = client.get(f"/v1/schedules/{schedule['id']}/runs").json()
            return len(fires) >= 2

        wait_until(fired_twice, 60, "two fires")
        client.post(f"/v1/schedules/{schedule['id']}/pause")
        first = fires[-1]  # newest first
        assert first["outcome"] == "started", first
        assert f"queued: its target is in use by another run ({busy['id']})" in first["message"]
        assert client.get(f"/v1/runs/{first['run_id']}").json()["state"] == "queued"
        # Its run still waits: the next fire is skipped, not queued again.
        assert fires[-2]["outcome"] == "skipped", fires
        client.post(f"/v1/runs/{busy['id']}/cancel")
        assert wait_for_run(client, first["run_id"])["state"] == "finished"


def test_a_restart_keeps_a_queued_run_queued_then_starts_it(stack: LeaseStack) -> None:
    with stack.client() as client:
        # Long enough to outlast the restart; cancelled once the second is seen queued.
        first = submit(client, openai_scenario(stack.target_a, requests=2000))
        second = submit(client, openai_scenario(stack.target_a, requests=2))
        assert second["state"] == "queued"
    stack.restart()
    with stack.client() as client:
        view = client.get(f"/v1/runs/{second['id']}").json()
        assert view["state"] == "queued", view
        assert view["queue"]["waiting_for"] == [first["id"]]
        assert client.get(f"/v1/runs/{first['id']}").json()["state"] == "running"
        client.post(f"/v1/runs/{first['id']}/cancel")
        assert wait_for_run(client, first["id"], 180)["state"] == "cancelled"
        done = wait_for_view(client, second["id"], lambda v: v["state"] == "finished", 180)
        a, b = span(client, first["id"]), span(client, second["id"])
    assert done["requests_done"] == 2
    assert a[1] <= b[0], (a, b)
