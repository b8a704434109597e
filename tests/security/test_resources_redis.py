"""Redis memory: one request cannot fill the broker (issue 23, "Redis memory").

Redis runs with ``noeviction``: when it is full, the whole service stops. The attack: a
77 KB YAML body whose anchors repeat a 60 KB ``extra_body`` in 32 providers and 60 KB
of tool definitions, over 10 regions without a live worker, so its 320 shards all wait
in their region queues. Before, each queued message carried its provider and workload
(~170 KB each, ~55 MB for the run) and stayed in Redis after the run was cancelled.

Now the run is either refused by the queued-bytes bound (``control.max_queued_bytes``)
or accepted with messages that refer to the run's stored provider and workload (a few
KB each); cancelling it removes its queued messages and stored parts, so Redis memory
returns to where it was. A normal run with a large ``extra_body`` still finishes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import redis

from scenarios.settings import env_name
from scenarios.wire.contract import region_queue, run_spec_key
from tests.conftest import API_TOKEN, start_control_plane
from tests.security.conftest import REGION, HostileStack, scenario_with, simulated
from tests.support.polls import wait_until

pytestmark = pytest.mark.integration

PROVIDERS = 32
IDLE_REGIONS = [f"idle-mem{i}" for i in range(10)]
CHUNK_CHARS = 20_000  # an extra_body of three such strings: ~60 KB (the cap is 64 KiB)
TOOL_CHARS = 17_500  # three tools' descriptions: ~53 KB (the cap is 64 KiB)
# Redis memory allowed to remain after the run is gone: allocator slack, the run's few
# expiring keys (cancel, done), the consumer-group bookkeeping of other tests.
MEMORY_SLACK_BYTES = 2 * 2**20


def anchored_body(regions: list[str], base_url: str = "http://127.0.0.1:9/v1") -> str:
    """A ~77 KB YAML scenario whose anchors expand to ~2 MB: one 20 KB string aliased
    three times into an extra_body that every provider aliases; 53 KB of tools."""
    chunk = "x" * CHUNK_CHARS
    providers = "\n".join(
        f"  - name: p{i}\n    kind: openai\n    base_url: {base_url}\n    model: m\n"
        "    extra_body: *body"
        for i in range(1, PROVIDERS)
    )
    tools = "\n".join(
        f"      - type: function\n        function:\n          name: tool{i}\n"
        f'          description: "{str(i) * TOOL_CHARS}"\n'
        "          parameters: {type: object, properties: {}}"
        for i in range(3)
    )
    return f"""name: anchored
providers:
  - name: p0
    kind: openai
    base_url: {base_url}
    model: m
    extra_body: &body
      a: &chunk "{chunk}"
      b: *chunk
      c: *chunk
{providers}
workload:
  mix:
    - prompt_tokens: {{dist: fixed, value: 4}}
      output_tokens: {{dist: fixed, value: 2}}
  tools:
    definitions:
{tools}
load:
  concurrency: [1]
  requests_per_level: 2
regions: {json.dumps(regions)}
"""


def used_memory(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def queued_lengths(client: redis.Redis, regions: list[str]) -> list[int]:
    return [int(client.llen(region_queue(r))) for r in regions]


@pytest.fixture
def broker(hostile_stack: HostileStack) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(hostile_stack.redis_url)
    yield client
    client.close()


def run_keys(client: redis.Redis, run_id: str) -> list[str]:
    """The run's keys still in Redis that do not expire by themselves."""
    keys = [k.decode() for k in client.scan_iter(match=f"tokenbench:run:{run_id}:*", count=500)]
    return [k for k in keys if client.ttl(k) == -1]


def test_anchor_expanded_run_queues_little_and_is_freed_on_cancel(
    hostile_stack: HostileStack, broker: redis.Redis
) -> None:
    client = hostile_stack.client
    body = anchored_body(IDLE_REGIONS)
    assert 70_000 < len(body) < 80_000
    baseline = used_memory(broker)

    stored = client.post(
        "/v1/scenarios", content=body, headers={"content-type": "application/yaml"}
    )
    assert stored.status_code == 201, stored.text
    created = client.post(
        "/v1/runs", json={"scenario_id": stored.json()["id"], "wait_for_workers": True}
    )
    if created.status_code == 422:  # refused by the queued-bytes bound: nothing queued
        assert "TOKENBENCH__CONTROL__MAX_QUEUED_BYTES" in created.text, created.text
        assert sum(queued_lengths(broker, IDLE_REGIONS)) == 0
        return
    assert created.status_code == 201, created.text
    run_id = created.json()["id"]
    shards = PROVIDERS * len(IDLE_REGIONS)
    assert created.json()["shards"] == shards
    wait_until(
        lambda: sum(queued_lengths(broker, IDLE_REGIONS)) == shards,
        60,
        "every shard queued in its idle region",
    )
    messages = [
        broker.lindex(region_queue(r), i)
        for r in IDLE_REGIONS
        for i in range(int(broker.llen(region_queue(r))))
    ]
    largest = max(len(m or b"") for m in messages)
    queued = used_memory(broker) - baseline
    spec_bytes = int(broker.memory_usage(run_spec_key(run_id)) or 0)
    print(
        f"\nanchored run: body {len(body)} B, {shards} shards queued, largest message "
        f"{largest} B, all messages {sum(len(m or b'') for m in messages)} B, stored parts "
        f"{spec_bytes} B, used_memory +{queued} B"
    )
    assert largest < 8 * 1024  # the provider and workload are not in the message
    assert spec_bytes < 4 * 2**20  # 32 providers and one workload, stored once

    cancelled = client.post(f"/v1/runs/{run_id}/cancel")
    assert cancelled.status_code == 202, cancelled.text
    assert hostile_stack.wait_for_run(run_id, timeout_s=60)["state"] == "cancelled"
    wait_until(
        lambda: sum(queued_lengths(broker, IDLE_REGIONS)) == 0,
        30,
        "the run's queued messages removed",
    )
    wait_until(lambda: not run_keys(broker, run_id), 30, "the run's keys removed")
    assert not broker.exists(run_spec_key(run_id))
    after = used_memory(broker)
    print(f"after cancel: used_memory {after - baseline:+d} B against the baseline")
    assert after < baseline + MEMORY_SLACK_BYTES


def test_a_run_with_a_large_extra_body_and_tools_still_succeeds(
    hostile_stack: HostileStack, simulate_endpoint: Callable[..., str]
) -> None:
    """The worker resolves the message's provider and workload from the run's stored
    parts and sends what the scenario says: a 20 KB extra_body, 10 KB of tools."""
    provider: dict[str, Any] = {
        "name": "big",
        "kind": "openai",
        "base_url": simulate_endpoint(ttft_ms=5, itl_ms=1),
        "model": "m",
        "extra_body": {"pad": "y" * CHUNK_CHARS},
    }
    tool = {
        "type": "function",
        "function": {"name": "pad", "description": "t" * 10_000, "parameters": {}},
    }
    body = scenario_with(provider, simulated("small"), requests=3)
    body["workload"]["tools"] = {"definitions": [tool]}
    answer = hostile_stack.client.post("/v1/runs", json={"scenario": body})
    assert answer.status_code == 201, answer.text
    view = hostile_stack.wait_for_run(answer.json()["id"])
    assert view["state"] == "finished", view
    assert view["requests_done"] == view["requests_planned"] == 6
    assert REGION in body["regions"]


@pytest.fixture(scope="module")
def bounded_plane(
    worker_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[httpx.Client]:
    """A control plane whose runs may queue at most 1 MiB (as an operator of a small
    Redis would set it)."""
    tmp = tmp_path_factory.mktemp("bounded")
    env = {**worker_env, env_name("control.max_queued_bytes"): str(2**20)}
    plane, base = start_control_plane(env, tmp / "api.duckdb", tmp / "api.log")
    with httpx.Client(
        base_url=base, headers={"authorization": f"Bearer {API_TOKEN}"}, timeout=30
    ) as client:
        yield client
    plane.stop()


def test_a_run_over_the_queued_bytes_bound_is_refused_before_anything_is_queued(
    bounded_plane: httpx.Client, broker: redis.Redis
) -> None:
    regions = [f"idle-bound{i}" for i in range(10)]
    stored = bounded_plane.post(
        "/v1/scenarios",
        content=anchored_body(regions),
        headers={"content-type": "application/yaml"},
    )
    assert stored.status_code == 201, stored.text
    answer = bounded_plane.post(
        "/v1/runs", json={"scenario_id": stored.json()["id"], "wait_for_workers": True}
    )
    assert answer.status_code == 422, answer.text
    (problem,) = answer.json()["detail"]
    assert problem["loc"] == ["scenario", "providers"]  # 32 providers of 60 KB: the weight
    assert "more than the 1.0 MiB a run may queue" in problem["msg"]
    assert "TOKENBENCH__CONTROL__MAX_QUEUED_BYTES" in problem["msg"]
    assert sum(queued_lengths(broker, regions)) == 0
    assert bounded_plane.get("/v1/runs").json() == []  # nothing was stored either
    fine = bounded_plane.post(
        "/v1/runs",
        json={
            "scenario": {**scenario_with(simulated()), "regions": regions[:1]},
            "wait_for_workers": True,
        },
    )
    assert fine.status_code == 201, fine.text  # a small run still goes
    bounded_plane.post(f"/v1/runs/{fine.json()['id']}/cancel")
