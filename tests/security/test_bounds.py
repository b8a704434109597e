"""Every input bounded, every failure contained: the issue's reproductions over real HTTP.

Each hostile request is answered with a 4xx that names the field path (or the cap), and
after each one the control plane is still healthy, ready and writable
(:meth:`HostileStack.assert_healthy`): no 500, no frozen event loop, no DuckDB left in
an aborted transaction, no answer buffered whole in the control plane's memory.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import psutil
import pytest

from scenarios import limits
from tests.security.conftest import HostileStack, scenario_with, simulated

pytestmark = pytest.mark.integration

# Regions without a worker: runs there are planned and stored, never executed.
IDLE = ["idle"]


def run_body(scenario: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A POST /v1/runs body that waits for workers of an idle region (nothing runs)."""
    return {"scenario": {**scenario, "regions": IDLE}, "wait_for_workers": True, **extra}


def locs(answer: httpx.Response) -> list[list[Any]]:
    return [entry["loc"] for entry in answer.json()["detail"]]


def messages(answer: httpx.Response) -> str:
    detail = answer.json()["detail"]
    return " ".join(e["msg"] for e in detail) if isinstance(detail, list) else str(detail)


def cancel_if_created(stack: HostileStack, answer: httpx.Response) -> None:
    if answer.status_code == 201:
        stack.client.post(f"/v1/runs/{answer.json()['id']}/cancel")


def with_load(**load: Any) -> dict[str, Any]:
    scenario = scenario_with(simulated())
    scenario["load"] = load
    return scenario


@pytest.fixture(autouse=True)
def healthy_after(hostile_stack: HostileStack) -> Iterator[None]:
    yield
    hostile_stack.assert_healthy()


# --------------------------------------------------------------------------- counts


def test_requests_per_level_of_three_billion(hostile_stack: HostileStack) -> None:
    """Was a 500 that left DuckDB in an aborted transaction (every later write failed)."""
    body = run_body(with_load(concurrency=[1], requests_per_level=3_000_000_000))
    answer = hostile_stack.client.post("/v1/runs", json=body)
    cancel_if_created(hostile_stack, answer)
    assert answer.status_code == 422, answer.text
    assert ["scenario", "load", "requests_per_level"] in locs(answer)


def test_a_billion_users(hostile_stack: HostileStack) -> None:
    """Was a planner loop quadratic in the shards that hung the event loop."""
    body = run_body(with_load(concurrency=[1_000_000_000], duration_s=10))
    answer = hostile_stack.client.post("/v1/runs", json=body, timeout=30)
    cancel_if_created(hostile_stack, answer)
    assert answer.status_code == 422, answer.text
    assert ["scenario", "load", "concurrency", 0] in locs(answer)


def test_a_valid_scenario_planning_too_many_shards(hostile_stack: HostileStack) -> None:
    scenario = with_load(concurrency=[limits.MAX_CONCURRENCY] * 2, duration_s=60)
    body = run_body(scenario)
    body["scenario"]["regions"] = [f"idle{i}" for i in range(limits.MAX_REGIONS)]
    answer = hostile_stack.client.post("/v1/runs", json=body, timeout=30)
    cancel_if_created(hostile_stack, answer)
    assert answer.status_code == 422, answer.text
    assert locs(answer) == [["scenario", "load"]]
    assert f"more than the {limits.MAX_SHARDS_PER_RUN}" in messages(answer)


def test_too_many_requests_in_total(hostile_stack: HostileStack) -> None:
    body = run_body(with_load(concurrency=[1] * 20, requests_per_level=10_000_000))
    answer = hostile_stack.client.post("/v1/runs", json=body)
    cancel_if_created(hostile_stack, answer)
    assert answer.status_code == 422, answer.text
    assert f"{limits.MAX_TOTAL_REQUESTS:,}" in messages(answer)


def test_overrides_are_bounded_too(hostile_stack: HostileStack) -> None:
    stored = hostile_stack.client.post("/v1/scenarios", json=scenario_with(simulated()))
    body = {
        "scenario_id": stored.json()["id"],
        "overrides": {"requests_per_level": 3_000_000_000, "regions": IDLE},
        "wait_for_workers": True,
    }
    answer = hostile_stack.client.post("/v1/runs", json=body)
    cancel_if_created(hostile_stack, answer)
    assert answer.status_code == 422, answer.text
    assert ["body", "overrides", "requests_per_level"] in locs(answer)


@pytest.mark.parametrize(
    ("load", "loc"),
    [([1], ["scenario", "load"]), ({"rate": "fast"}, ["scenario", "load", "rate"])],
)
def test_overrides_of_a_malformed_load(
    hostile_stack: HostileStack, load: Any, loc: list[Any]
) -> None:
    """Merging overrides into a load that is not a mapping was a 500."""
    body = run_body({**scenario_with(simulated()), "load": load}, overrides={"rps": [1]})
    answer = hostile_stack.client.post("/v1/runs", json=body)
    cancel_if_created(hostile_stack, answer)
    assert answer.status_code == 422, answer.text
    assert locs(answer) == [loc]


def test_a_large_plan_is_created_and_cancelled_off_the_event_loop(
    hostile_stack: HostileStack,
) -> None:
    """A run of 1,568 shards is planned, stored, dispatched and cancelled while /healthz
    keeps answering (settling its shards one transaction each took ~30 s of the loop)."""
    scenario = with_load(concurrency=[limits.MAX_CONCURRENCY], duration_s=60)
    body = run_body(scenario)
    body["scenario"]["regions"] = [f"idle{i}" for i in range(8)]
    answers: list[int] = []
    done = threading.Event()

    def poll() -> None:
        with httpx.Client(base_url=hostile_stack.base, timeout=30) as client:
            while not done.is_set():
                answers.append(client.get("/healthz").status_code)

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        created = hostile_stack.client.post("/v1/runs", json=body, timeout=120)
        cancel_if_created(hostile_stack, created)
        assert created.status_code == 201, created.text
        view = hostile_stack.wait_for_run(created.json()["id"])
    finally:
        done.set()
        poller.join()
    assert created.json()["shards"] == 196 * 8  # 100k users / 512 per shard, 8 regions
    assert view["state"] == "cancelled"
    assert answers and set(answers) == {200}


# --------------------------------------------------------------------------- sizes


def test_ten_million_prompt_tokens(hostile_stack: HostileStack) -> None:
    """Was accepted, and a worker built a 53 MB request."""
    scenario = scenario_with(simulated())
    scenario["workload"]["mix"][0]["prompt_tokens"] = {"dist": "fixed", "value": 10_000_000}
    answer = hostile_stack.client.post("/v1/scenarios", json=scenario)
    assert answer.status_code == 422, answer.text
    assert ["scenario", "workload", "mix", 0, "prompt_tokens", "value"] in locs(answer)


def test_lognormal_tails_and_shared_prefix_are_bounded(hostile_stack: HostileStack) -> None:
    scenario = scenario_with(simulated())
    scenario["workload"]["mix"][0]["prompt_tokens"] = {
        "dist": "lognormal",
        "mean": 1000,
        "sigma": 1,
        "max": 50_000_000,
    }
    scenario["workload"]["shared_prefix_tokens"] = 20_000_000
    answer = hostile_stack.client.post("/v1/scenarios", json=scenario)
    assert answer.status_code == 422, answer.text
    assert ["scenario", "workload", "mix", 0, "prompt_tokens", "max"] in locs(answer)
    assert ["scenario", "workload", "shared_prefix_tokens"] in locs(answer)


def test_a_large_extra_body(hostile_stack: HostileStack) -> None:
    provider = {
        "name": "big",
        "kind": "openai",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "m",
        "extra_body": {"pad": "x" * 200_000},
    }
    answer = hostile_stack.client.post("/v1/scenarios", json=scenario_with(provider))
    assert answer.status_code == 422, answer.text
    assert ["scenario", "providers", 0, "extra_body"] in locs(answer)
    assert str(limits.MAX_EXTRA_BODY_BYTES) in messages(answer)


def test_images_over_the_pixel_bounds(hostile_stack: HostileStack) -> None:
    """A submitter must not make workers generate and hold gigabytes of images."""
    scenario = scenario_with(simulated())
    scenario["workload"]["images"] = {"width": 4096, "height": 4096}
    answer = hostile_stack.client.post("/v1/scenarios", json=scenario)
    assert answer.status_code == 422, answer.text
    assert ["scenario", "workload", "images"] in locs(answer)
    assert f"{limits.MAX_IMAGE_PIXELS:,}" in messages(answer)
    scenario["workload"]["images"] = {"width": 2048, "height": 2048, "distinct": 1024}
    answer = hostile_stack.client.post("/v1/scenarios", json=scenario)
    assert answer.status_code == 422, answer.text
    assert "lower distinct" in messages(answer)
    scenario["workload"]["images"] = {"count": 1000}
    answer = hostile_stack.client.post("/v1/scenarios", json=scenario)
    assert ["scenario", "workload", "images", "count"] in locs(answer)


# --------------------------------------------------------------------------- numbers


def test_infinity_and_nan_in_yaml(hostile_stack: HostileStack) -> None:
    """rps .nan was accepted; Infinity failed later with a 500."""
    text = (
        "name: x\nproviders: [{name: sim, kind: simulated}]\n"
        "workload: {mix: [{prompt_tokens: {dist: fixed, value: 4}, "
        "output_tokens: {dist: fixed, value: 2}}]}\n"
        "load: {rate: {rps: [.nan, .inf]}, duration_s: .inf, warmup_s: -.inf}\n"
    )
    answer = hostile_stack.client.post(
        "/v1/scenarios", content=text, headers={"content-type": "application/yaml"}
    )
    assert answer.status_code == 422, answer.text
    found = {tuple(entry["loc"]): entry for entry in answer.json()["detail"]}
    for loc in (
        ("scenario", "load", "rate", "rps", 0),
        ("scenario", "load", "rate", "rps", 1),
        ("scenario", "load", "duration_s"),
        ("scenario", "load", "warmup_s"),
    ):
        assert found[loc]["msg"] == "Input should be a finite number", found
        assert found[loc]["line"] == 4


@pytest.mark.parametrize("number", ["1e999", "Infinity", "NaN", "-1e999"])
def test_infinity_and_nan_in_json(hostile_stack: HostileStack, number: str) -> None:
    body = json.dumps(run_body(with_load(rate={"rps": [1]}, duration_s=5)))
    body = body.replace('"duration_s": 5', f'"duration_s": {number}')
    answer = hostile_stack.client.post(
        "/v1/runs", content=body, headers={"content-type": "application/json"}
    )
    cancel_if_created(hostile_stack, answer)
    assert answer.status_code == 422, answer.text
    assert ["scenario", "load", "duration_s"] in locs(answer)


def test_infinite_override_rate(hostile_stack: HostileStack) -> None:
    stored = hostile_stack.client.post("/v1/scenarios", json=scenario_with(simulated()))
    body = (
        f'{{"scenario_id": "{stored.json()["id"]}", "wait_for_workers": true, '
        '"overrides": {"rps": [1e999], "regions": ["idle"]}}'
    )
    answer = hostile_stack.client.post(
        "/v1/runs", content=body, headers={"content-type": "application/json"}
    )
    cancel_if_created(hostile_stack, answer)
    assert answer.status_code == 422, answer.text
    assert ["body", "overrides", "rps", 0] in locs(answer)


# --------------------------------------------------------------------------- documents


def alias_bomb() -> str:
    """The issue's alias bomb: about 700 bytes, each level ten times the last (10^9
    values once expanded)."""
    lines = ['lol0: &lol0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, 9):
        aliases = ",".join([f"*lol{level - 1}"] * 10)
        lines.append(f"lol{level}: &lol{level} [{aliases}]")
    return "description:\n" + "".join(f"  {line}\n" for line in lines)


@contextmanager
def peak_rss(stack: HostileStack) -> Iterator[list[int]]:
    """The control plane's resident memory before and at its peak during the block."""
    process = psutil.Process(stack.plane.process.pid)
    sample = [process.memory_info().rss, process.memory_info().rss]
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            sample[1] = max(sample[1], process.memory_info().rss)
            time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        yield sample
    finally:
        stop.set()
        watcher.join()


def test_the_alias_bomb(hostile_stack: HostileStack) -> None:
    """Froze the event loop for seconds and took hundreds of MB."""
    text = alias_bomb()
    assert len(text.encode()) < 1024
    with peak_rss(hostile_stack) as rss:
        answer = hostile_stack.client.post(
            "/v1/scenarios", content=text, headers={"content-type": "application/yaml"}
        )
    assert answer.status_code == 422, answer.text
    (entry,) = answer.json()["detail"]
    assert entry["loc"] == ["scenario"]
    assert f"more than {limits.MAX_DOCUMENT_NODES} values" in entry["msg"]
    assert entry["line"] <= 6
    assert rss[1] - rss[0] < 64 * 1024 * 1024


@pytest.mark.parametrize("content_type", ["application/json", "application/yaml"])
def test_deeply_nested_scenario_bodies(hostile_stack: HostileStack, content_type: str) -> None:
    """100,000 '[' was a 500."""
    answer = hostile_stack.client.post(
        "/v1/scenarios", content="[" * 100_000, headers={"content-type": content_type}
    )
    assert answer.status_code == 422, answer.text
    assert "levels deep" in messages(answer)


def test_deeply_nested_run_bodies(hostile_stack: HostileStack) -> None:
    too_deep = '{"scenario": {"description": ' + "[" * 100_000
    answer = hostile_stack.client.post(
        "/v1/runs", content=too_deep, headers={"content-type": "application/json"}
    )
    assert 400 <= answer.status_code < 500, answer.text
    # Deep enough for the cap, shallow enough for every JSON parser.
    nested = json.dumps(run_body({**scenario_with(simulated()), "description": None}))
    deep = "[" * 500 + "1" + "]" * 500
    answer = hostile_stack.client.post(
        "/v1/runs",
        content=nested.replace('"description": null', f'"description": {deep}'),
        headers={"content-type": "application/json"},
    )
    cancel_if_created(hostile_stack, answer)
    assert answer.status_code == 422, answer.text
    assert "levels deep" in messages(answer)


def test_a_deeply_nested_gateway_config(hostile_stack: HostileStack) -> None:
    config = {
        "primary": simulated("primary"),
        "regions": IDLE,
        "privacy": {"store_text": json.loads("[" * 200 + "]" * 200)},
    }
    answer = hostile_stack.client.post(
        "/v1/shadow-sessions", json={"config": config, "wait_for_workers": True}
    )
    assert answer.status_code == 422, answer.text
    assert "levels deep" in messages(answer)


# --------------------------------------------------------------------------- SQL


def test_a_half_gigabyte_sql_answer(hostile_stack: HostileStack) -> None:
    """Returned 500 MB and pushed the control plane to 2.2 GB."""
    with peak_rss(hostile_stack) as rss:
        answer = hostile_stack.client.post(
            "/v1/sql", json={"query": "SELECT repeat('x', 500000000) AS x"}, timeout=120
        )
    assert answer.status_code == 413, answer.text
    assert answer.json()["kind"] == "too_large"
    assert rss[1] - rss[0] < 256 * 1024 * 1024, rss


@pytest.mark.parametrize("fmt", ["json", "csv", "arrow", "parquet"])
def test_an_answer_over_the_byte_cap_in_every_format(hostile_stack: HostileStack, fmt: str) -> None:
    query = "SELECT repeat('x', 10000) AS x FROM range(10000)"  # 100 MB: over 64 MiB
    answer = hostile_stack.client.post(
        "/v1/sql", json={"query": query, "format": fmt, "max_rows": 10_000}, timeout=120
    )
    assert answer.status_code == 413, answer.text
    assert "TOKENBENCH__API__SQL_MAX_BYTES" in answer.json()["detail"]


def test_an_answer_under_the_cap_is_whole(hostile_stack: HostileStack) -> None:
    query = "SELECT i, repeat('x', 1000) AS s FROM range(1000) t(i)"
    answer = hostile_stack.client.post("/v1/sql", json={"query": query, "max_rows": 1000})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["row_count"] == 1000 and len(body["rows"]) == 1000
    assert body["columns"][1] == {"name": "s", "type": "string"}
    assert body["rows"][999] == {"i": 999, "s": "x" * 1000}
