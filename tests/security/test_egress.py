"""One egress guard for every outbound connection (issue: get past the egress policy).

Over REST, every URL field of a provider naming a metadata or management address, in
any spelling (IPv4-mapped, NAT64, 6to4, Teredo, IPv4-compatible, legacy IPv4 forms),
is a 422 naming that field, even though loopback and private addresses are allowed on
this stack. URLs a provider's *answer* hands back (Replicate's stream and poll URLs) are
held to the same rules plus the key's binding: a forbidden one makes the request an
error row and nothing is sent there. (The pinned-address and DNS-rebinding behaviour
of the transport is tested on real sockets with an injected resolver in
tests/unit/scenarios/security/test_egress.py.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import Proc, start_worker
from tests.fakes.catcher import Catcher
from tests.security.conftest import REGION, HostileStack, scenario_with

pytestmark = pytest.mark.integration

# The reproductions first, then spellings of our own.
FORBIDDEN_BASES = [
    "http://[::ffff:169.254.169.254]",
    "http://[::ffff:100.100.100.200]",
    "http://168.63.129.16",
    "http://100.64.1.1",
    "http://[fd00:ec2::254]",
    "http://[64:ff9b::a9fe:a9fe]",
    "http://[2002:a9fe:a9fe::]",
    "http://[64:ff9b:1::a9fe:a9fe]",
    "http://[2001:0:4136:e378:8000:63bf:5601:5601]",  # Teredo, client 169.254.169.254
    "http://[::a9fe:a9fe]",
    "http://[::ffff:0:a9fe:a9fe]",
    "http://2852039166",  # 169.254.169.254 as one number
    "http://0xa9.0xfe.0xa9.0xfe",
    "http://169.254.169.254.",
    "http://[fe80::1%25eth0]",
    "http://192.0.0.192",  # Oracle Cloud metadata
    "http://[::]",
]


def assert_refused_at(answer: Any, path: list[Any]) -> None:
    assert answer.status_code == 422, answer.text
    detail = answer.json()["detail"]
    assert [d["loc"] for d in detail] == [path], detail
    assert "refused" in detail[0]["msg"]
    assert "Traceback" not in answer.text


@pytest.mark.parametrize("base", FORBIDDEN_BASES)
def test_metadata_addresses_are_refused_in_every_spelling(
    hostile_stack: HostileStack, base: str
) -> None:
    provider = {"name": "meta", "kind": "openai", "base_url": f"{base}/v1", "model": "m"}
    scenario = scenario_with(provider)
    assert_refused_at(
        hostile_stack.client.post("/v1/runs", json={"scenario": scenario}),
        ["scenario", "providers", 0, "base_url"],
    )
    assert_refused_at(
        hostile_stack.client.post("/v1/scenarios", json=scenario),
        ["scenario", "providers", 0, "base_url"],
    )
    hostile_stack.assert_healthy()


@pytest.mark.parametrize(
    ("provider", "field"),
    [
        ({"kind": "bedrock", "model": "m", "endpoint_url": "http://[::ffff:169.254.169.254]"},
         "endpoint_url"),
        ({"kind": "azure-openai", "model": "m", "api_key_env": "K",
          "endpoint": "http://168.63.129.16"}, "endpoint"),
        ({"kind": "tgi", "base_url": "http://[::ffff:168.63.129.16]"}, "base_url"),
        ({"kind": "llamacpp", "base_url": "http://100.64.0.1"}, "base_url"),
        ({"kind": "replicate", "model": "a/b", "api_key_env": "K",
          "base_url": "http://[64:ff9b::a9fe:a9fe]/v1"}, "base_url"),
        ({"kind": "openai-completions", "model": "m", "base_url": "http://[2002:a9fe:a9fe::]"},
         "base_url"),
    ],
)  # fmt: skip
def test_every_url_field_of_every_kind_is_checked(
    hostile_stack: HostileStack, provider: dict[str, Any], field: str
) -> None:
    scenario = scenario_with({"name": "sim", "kind": "simulated"}, {"name": "meta", **provider})
    assert_refused_at(
        hostile_stack.client.post("/v1/runs", json={"scenario": scenario}),
        ["scenario", "providers", 1, field],
    )
    hostile_stack.assert_healthy()


def test_shadow_session_providers_are_checked(hostile_stack: HostileStack) -> None:
    config = {
        "primary": {"name": "prod", "kind": "simulated"},
        "shadows": [
            {"name": "meta", "kind": "openai", "model": "m",
             "base_url": "http://[::ffff:100.100.100.200]/v1"},
        ],
        "regions": [REGION],
    }  # fmt: skip
    answer = hostile_stack.client.post("/v1/shadow-sessions", json={"config": config})
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"][0]["loc"][-1] == "base_url"
    hostile_stack.assert_healthy()


# ------------------------------------------------------------------ URLs handed back


@pytest.fixture
def elsewhere() -> Iterator[Catcher]:
    """A second attacker's server, at a host name no key is bound to."""
    server = Catcher(host="localhost").start()
    yield server
    server.stop()


def replicate_at(catcher: Catcher) -> dict[str, Any]:
    # The API host is bound to the key on this worker (127.0.0.1): the creation call is
    # legitimate; what it hands back is what is under attack.
    return {
        "name": "replicate",
        "kind": "replicate",
        "base_url": f"{catcher.url}/v1",
        "model": "a/b",
        "api_key_env": "BOUND_TEST_KEY",
    }


def hand_back(catcher: Catcher, stream: str, get: str | None = None) -> None:
    urls = {"stream": stream, "get": get or f"{catcher.url}/v1/predictions/p1"}
    catcher.answer("/predictions", {"id": "p1", "urls": urls}, status=201)


def run(stack: HostileStack, scenario: dict[str, Any]) -> dict[str, Any]:
    created = stack.client.post("/v1/runs", json={"scenario": scenario})
    assert created.status_code == 201, created.text
    return stack.wait_for_run(created.json()["id"])


def error_rows(stack: HostileStack, run_id: str) -> list[tuple[str, str]]:
    """(error_class, error_message) of the run's records, from the SQL API."""
    answer = stack.client.post(
        "/v1/sql",
        json={
            "query": "SELECT error_class, error_message FROM request_records "
            f"WHERE run_id = '{run_id}' ORDER BY seq",
            "max_staleness_s": 0,
        },
    )
    assert answer.status_code == 200, answer.text
    rows = answer.json()["rows"]
    return [(str(r[0]), str(r[1])) if isinstance(r, list) else
            (str(r["error_class"]), str(r["error_message"])) for r in rows]  # fmt: skip


REPLICATE_SSE = b"event: output\ndata: hi\n\nevent: output\ndata: !\n\nevent: done\ndata: {}\n\n"


def test_replicate_stream_url_on_a_bound_host_works(
    hostile_stack: HostileStack, catcher: Catcher
) -> None:
    # Positive control: a well-behaved API's stream URL is followed.
    hand_back(catcher, f"{catcher.url}/stream/p1")
    catcher.answer("/stream/p1", REPLICATE_SSE, content_type="text/event-stream")
    view = run(hostile_stack, scenario_with(replicate_at(catcher), requests=2))
    assert view["state"] == "finished", view
    assert view["requests_done"] == 2 and view["errors"] == 0
    assert [r.method for r in catcher.requests].count("GET") >= 2
    hostile_stack.assert_healthy()


@pytest.mark.parametrize(
    "which", ["stream-unbound-host", "stream-metadata", "stream-cgnat", "stream-file", "poll"]
)
def test_replicate_urls_handed_back_are_refused_unless_bound_and_allowed(
    hostile_stack: HostileStack, catcher: Catcher, elsewhere: Catcher, which: str
) -> None:
    good_stream = f"{catcher.url}/stream/p1"
    catcher.answer("/stream/p1", REPLICATE_SSE, content_type="text/event-stream")
    stream, get = {
        "stream-unbound-host": (f"{elsewhere.url}/stream/p1", None),
        "stream-metadata": ("http://[::ffff:169.254.169.254]/latest/meta-data/", None),
        "stream-cgnat": ("http://100.100.100.200/latest/meta-data/", None),
        "stream-file": ("file:///etc/passwd", None),
        "poll": (good_stream, f"{elsewhere.url}/v1/predictions/p1"),
    }[which]
    hand_back(catcher, stream, get)
    view = run(hostile_stack, scenario_with(replicate_at(catcher), requests=2))
    assert view["state"] == "finished", view  # the shard ran: its requests are error rows
    assert view["requests_done"] == 2 and view["errors"] == 2
    # Refused before sending, not a failed attempt to connect there.
    rows = error_rows(hostile_stack, view["id"])
    assert [c for c, _ in rows] == ["protocol", "protocol"], rows
    assert all("URL refused" in m or "not https" in m for _, m in rows), rows
    assert elsewhere.requests == []
    # Only the creation calls reached the (bound) API host: nothing followed the URLs.
    assert [(r.method, r.path.rsplit("/", 1)[-1]) for r in catcher.requests] == [
        ("POST", "predictions")
    ] * 2
    hostile_stack.assert_healthy()


# ------------------------------------------------------------------ a worker's own policy

STRICT = "strict"


@pytest.fixture(scope="module")
def strict_worker(
    hostile_stack: HostileStack,
    worker_env: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Proc]:
    """A worker with the default policy: loopback refused (its own simulators excepted)."""
    env = {k: v for k, v in worker_env.items() if not k.startswith("TOKENBENCH__EGRESS__")}
    log = tmp_path_factory.mktemp("strict") / "worker-strict.log"
    proc = start_worker(STRICT, env, log, hostile_stack.redis_url)
    yield proc
    proc.stop(3)


def test_a_worker_applies_its_own_policy_and_trusts_only_its_own_endpoints(
    hostile_stack: HostileStack, catcher: Catcher, strict_worker: Proc
) -> None:
    # The control plane allows loopback, the worker does not: the worker's refusal wins,
    # while the simulated endpoint it started itself on loopback is trusted exactly.
    scenario = scenario_with(
        {"name": "sim", "kind": "simulated", "simulate": {"ttft_ms": 2, "itl_ms": 1}},
        {"name": "loop", "kind": "openai", "base_url": f"{catcher.url}/v1", "model": "m"},
        regions=[STRICT],
    )
    view = run(hostile_stack, scenario)
    found = {s["provider"]: s for stage in view["stages"] for s in stage["shards"]}
    assert found["sim"]["state"] == "finished" and found["sim"]["errors"] == 0
    assert found["loop"]["state"] == "failed"
    assert "TOKENBENCH__EGRESS__ALLOW_LOOPBACK=true" in (found["loop"]["message"] or "")
    assert catcher.requests == []
    hostile_stack.assert_healthy()
