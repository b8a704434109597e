"""Quotas and fairness attacked over real HTTP (docs/teams.md, "Quotas and fairness").

A real control plane with tight quotas (two runs' worth of queue, one schedule, 2,000
bytes of datasets, 5 requests per second per token with a burst of 20) and tokens of
three teams. A token flooding the API gets 429 with ``Retry-After`` and slows nobody
else down; unauthenticated floods get 401 and fill no bucket; a team's queue refuses
past ``max_queued_runs`` naming the setting, and another team's run still starts.

No worker serves the region: runs wait for one (``wait_for_workers``), so they stay
``running`` and hold their team's concurrency quota for as long as the test needs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis

from analytics.store.db import connect
from api.access.caller import Role
from api.access.tokens import TokenRegistry
from api.local.redis_server import RedisServer
from scenarios.wire.contract import region_queue
from tests.conftest import API_TOKEN, start_control_plane

pytestmark = pytest.mark.integration

REGION = f"quota-{uuid.uuid4().hex[:6]}"
LIMITS = {
    "TOKENBENCH__TEAMS__REQUESTS_PER_S": "5",
    "TOKENBENCH__TEAMS__REQUEST_BURST": "20",
    "TOKENBENCH__TEAMS__MAX_CONCURRENT_RUNS": "1",
    "TOKENBENCH__TEAMS__MAX_QUEUED_RUNS": "1",
    "TOKENBENCH__TEAMS__MAX_SCHEDULES": "1",
    "TOKENBENCH__TEAMS__MAX_DATASET_BYTES": "2000",
}


def scenario() -> dict[str, Any]:
    return {
        "name": "quota",
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
        "regions": [REGION],
    }


class Stack:
    def __init__(self, base: str, tokens: dict[str, str]) -> None:
        self.base = base
        self.tokens = tokens

    def client(self, team: str) -> httpx.Client:
        token = API_TOKEN if team == "default" else self.tokens[team]
        return httpx.Client(
            base_url=self.base, headers={"authorization": f"Bearer {token}"}, timeout=30
        )


@pytest.fixture(scope="module")
def stack(
    worker_env: dict[str, str], redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("quotas")
    db = tmp / "api.duckdb"
    con = connect(db)
    try:
        registry = TokenRegistry(con)
        tokens = {
            team: registry.mint(team, Role.SUBMITTER, team, None, None)[0]
            for team in ("red", "blue", "flood")
        }
    finally:
        con.close()
    plane, base = start_control_plane({**worker_env, **LIMITS}, db, tmp / "api.log")
    yield Stack(base, tokens)
    plane.stop()
    leftover = redis.Redis.from_url(redis_server.url)
    leftover.delete(region_queue(REGION))
    leftover.close()


def test_a_flooding_token_gets_429_with_retry_after_and_slows_nobody_else(stack: Stack) -> None:
    with stack.client("flood") as flood, stack.client("blue") as blue:
        answers = [flood.get("/v1/runs") for _ in range(60)]
        refused = [a for a in answers if a.status_code == 429]
        assert refused, [a.status_code for a in answers]
        assert {a.status_code for a in answers} <= {200, 429}
        first = refused[0]
        assert int(first.headers["retry-after"]) >= 1
        body = first.json()
        assert body["quota"] == "requests_per_s"
        assert body["setting"] == "TOKENBENCH__TEAMS__REQUESTS_PER_S"
        assert "TOKENBENCH__TEAMS__REQUEST_BURST" in body["detail"]
        assert body["retry_after_s"] == int(first.headers["retry-after"])
        # Another token's bucket is its own.
        assert blue.get("/v1/runs").status_code == 200


def test_unauthenticated_floods_get_401_and_fill_no_bucket(stack: Stack) -> None:
    with httpx.Client(base_url=stack.base, timeout=30) as anonymous:
        for headers in ({}, {"authorization": f"Bearer {stack.tokens['red']}x"}):
            statuses = {anonymous.get("/v1/runs", headers=headers).status_code for _ in range(40)}
            assert statuses == {401}
    with stack.client("red") as red:
        assert red.get("/v1/runs").status_code == 200


def test_a_full_queue_refuses_naming_the_setting_and_blocks_no_other_team(stack: Stack) -> None:
    body = {"scenario": scenario(), "wait_for_workers": True}
    with stack.client("red") as red, stack.client("blue") as blue:
        going = red.post("/v1/runs", json=body)
        assert going.status_code == 201 and going.json()["state"] == "running", going.text
        queued = red.post("/v1/runs", json=body)
        assert queued.status_code == 201 and queued.json()["state"] == "queued", queued.text
        assert (
            "max_concurrent_runs (TOKENBENCH__TEAMS__MAX_CONCURRENT_RUNS)"
            in (queued.json()["queue"]["reason"])
        )
        refused = red.post("/v1/runs", json=body)
        assert refused.status_code == 429, refused.text
        assert refused.json()["quota"] == "max_queued_runs"
        assert "team red has 1 queued runs, its max_queued_runs" in refused.json()["detail"]
        assert "(TOKENBENCH__TEAMS__MAX_QUEUED_RUNS)" in refused.json()["detail"]
        # Blue's own quota is untouched by red's queue.
        other = blue.post("/v1/runs", json=body)
        assert other.status_code == 201 and other.json()["state"] == "running", other.text
        # Cancelling the queued run frees the queue's place at once.
        assert red.post(f"/v1/runs/{queued.json()['id']}/cancel").json()["state"] == "cancelled"
        again = red.post("/v1/runs", json=body)
        assert again.status_code == 201 and again.json()["state"] == "queued", again.text
        for client, run in ((red, again), (red, going), (blue, other)):
            assert client.post(f"/v1/runs/{run.json()['id']}/cancel").status_code == 202


def test_schedules_and_dataset_bytes_past_the_quota_are_refused(stack: Stack) -> None:
    with stack.client("default") as admin:
        stored = admin.post("/v1/scenarios", json=scenario())
        assert stored.status_code == 201, stored.text
        schedule = {"scenario_id": stored.json()["id"], "cron": "0 0 1 1 *"}
        first = admin.post("/v1/schedules", json=schedule)
        assert first.status_code == 201, first.text
        second = admin.post("/v1/schedules", json=schedule)
        assert second.status_code == 429, second.text
        assert second.json()["setting"] == "TOKENBENCH__TEAMS__MAX_SCHEDULES"
        paused = admin.post(f"/v1/schedules/{first.json()['id']}/pause")
        assert paused.status_code == 200, paused.text
        assert admin.post("/v1/schedules", json=schedule).status_code == 201
        # Resuming the paused one would make two active schedules.
        resumed = admin.post(f"/v1/schedules/{first.json()['id']}/resume")
        assert resumed.status_code == 429 and resumed.json()["quota"] == "max_schedules"

        line = b'{"prompt": "' + b"x" * 80 + b'"}\n'
        jsonl = {"content-type": "application/x-ndjson"}
        kept = admin.post("/v1/datasets", content=line * 15, headers=jsonl)
        assert kept.status_code == 201, kept.text
        over = admin.post("/v1/datasets", content=line.replace(b"x", b"y") * 15, headers=jsonl)
        assert over.status_code == 429, over.text
        assert over.json()["quota"] == "max_dataset_bytes"
        assert "TOKENBENCH__TEAMS__MAX_DATASET_BYTES" in over.json()["detail"]
