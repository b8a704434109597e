"""The gateway application served over loopback HTTP in this process: the primary's
answers relayed unchanged, each request measured and captured, samples handed to the
shadow regions' queues in batches, and counters that say so."""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import httpx
import orjson
import pyarrow as pa
import pytest
import redis
from redis.asyncio import Redis

from api.local.redis_server import RedisServer
from scenarios.gateway_config import parse_gateway_config
from scenarios.wire.contract import (
    PRIMARY_SHARD,
    RecordBatch,
    ShadowBatch,
    captures_stream,
    decode_captures,
    records_stream,
    region_queue,
)
from scenarios.wire.records import ipc_to_table
from workers.gateway.server import Gateway
from workers.runtime.event_loop import new_loop

pytestmark = pytest.mark.integration

T = TypeVar("T")
CHAT = {"model": "prod", "messages": [{"role": "user", "content": "hello there gateway"}]}


@pytest.fixture
def region(redis_server: RedisServer) -> Iterator[str]:
    """A shadow region no worker consumes; its queue is removed afterwards."""
    name = f"gws-{uuid.uuid4().hex[:8]}"
    yield name
    with redis.Redis.from_url(redis_server.url) as client:
        client.delete(region_queue(name))


def gateway(redis_url: str, region: str, session: str) -> Gateway:
    config = parse_gateway_config(
        {
            "primary": {
                "name": "prod",
                "kind": "simulated",
                "model": "prod-model",
                "simulate": {"ttft_ms": 2, "itl_ms": 1},
            },
            "shadows": [{"name": "cand", "kind": "simulated"}],
            "regions": [region],
            "sample_rate": 1.0,
            "privacy": {"store_text": True},
        }
    )
    return Gateway(config, session, "gw-test", redis_url)


@asynccontextmanager
async def serving(gateway: Gateway) -> AsyncIterator[httpx.AsyncClient]:
    """``gateway`` (and its capture process) on a free loopback port, and a client for it."""
    await gateway.start()
    try:
        server = await gateway.listen("127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            yield client
        server.close()
    finally:
        await gateway.stop()


def run(coro: Coroutine[Any, Any, T]) -> T:
    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(coro)


def sse(text: str) -> list[Any]:
    data = [part.removeprefix("data: ") for part in text.split("\n\n") if part.startswith("data: ")]
    return [d if d == "[DONE]" else orjson.loads(d) for d in data]


def test_requests_are_relayed_measured_captured_and_mirrored(
    redis_server: RedisServer, region: str
) -> None:
    session = f"sess-{uuid.uuid4().hex[:8]}"

    async def go() -> dict[str, Any]:
        answers: dict[str, Any] = {}
        async with serving(gateway(redis_server.url, region, session)) as client:
            answers["health"] = (await client.get("/gateway/health")).json()
            answers["models"] = (await client.get("/v1/models")).json()
            answers["stream"] = await client.post(
                "/v1/chat/completions",
                json={**CHAT, "stream": True, "max_tokens": 4, "temperature": 0.3},
            )
            answers["plain"] = await client.post(
                "/v1/chat/completions", json={**CHAT, "max_tokens": 3}
            )
            answers["bad"] = await client.post("/v1/chat/completions", json={"messages": []})
            answers["stats"] = (await client.get("/gateway/stats")).json()
        # Stopped: the sender sent what was queued, the sink published what it held.
        store = Redis.from_url(redis_server.url)
        try:
            answers["batches"] = [
                RecordBatch.decode(f) for _, f in await store.xrange(records_stream(session))
            ]
            answers["captures"] = [
                row
                for _, f in await store.xrange(captures_stream(session))
                for row in decode_captures(f)
            ]
            answers["queued"] = await store.lrange(region_queue(region), 0, -1)
        finally:
            await store.aclose()
        return answers

    got = run(go())
    assert got["health"] == {"status": "ok", "session": session}
    assert [m["id"] for m in got["models"]["data"]] == ["prod-model"]

    stream, plain = got["stream"], got["plain"]
    assert stream.status_code == plain.status_code == 200
    events = sse(stream.text)
    assert events[-1] == "[DONE]"
    tokens = [e for e in events[:-1] if e["choices"] and e["choices"][0]["delta"].get("content")]
    assert len(tokens) == 4
    # The gateway asked the primary for usage; the client did not, so it gets none.
    assert not any("usage" in e for e in events[:-1])
    assert plain.json()["usage"]["completion_tokens"] == 3
    keys = [stream.headers["x-tokenbench-request-key"], plain.headers["x-tokenbench-request-key"]]
    assert len(set(keys)) == 2

    bad = got["bad"]
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"

    stats = got["stats"]
    assert (
        stats["requests"],
        stats["bad_requests"],
        stats["sampled"],
        stats["primary_errors"],
    ) == (
        2,
        1,
        2,
        0,
    )
    assert stats["shadow"]["offered"] == 2

    # The primary's records, one per answered request, under the session's primary shard.
    assert {b.shard_id for b in got["batches"]} == {PRIMARY_SHARD}
    columns = ["request_key", "status", "load_kind", "completion_tokens", "token_count_source",
               "region", "provider"]  # fmt: skip
    table = pa.concat_tables([ipc_to_table(b.ipc) for b in got["batches"]])
    records = table.select(columns).to_pylist()
    by_key = {r["request_key"]: r for r in records}
    assert set(by_key) == set(keys)
    streamed = by_key[keys[0]]
    assert streamed["status"] == "ok" and streamed["load_kind"] == "live"
    assert streamed["completion_tokens"] == 4 and streamed["token_count_source"] == "usage"
    assert streamed["region"] == "gateway" and streamed["provider"] == "prod"

    # Captures: one per answered request, text kept (privacy.store_text), prompt hashed.
    captures = {c["request_key"]: c for c in got["captures"]}
    assert set(captures) == set(keys)
    assert all(c["sampled"] and c["enqueued"] for c in captures.values())
    assert orjson.loads(captures[keys[0]]["messages"]) == CHAT["messages"]
    assert len(captures[keys[0]]["prompt_sha256"]) == 64

    # Every sample on the region's queue (in batches), with the client's parameters.
    batches = [
        ShadowBatch.model_validate(orjson.loads(base64.b64decode(orjson.loads(m)["body"]))[0][0])
        for m in got["queued"]
    ]
    assert {b.run_id for b in batches} == {session}
    assert all([p.name for p in b.providers] == ["cand"] for b in batches)
    by_task = {t.request_key: t for b in batches for t in b.tasks()}
    assert set(by_task) == set(keys) and sum(len(b.samples) for b in batches) == 2
    task = by_task[keys[0]]
    assert task.messages == CHAT["messages"]
    assert task.params == {"temperature": 0.3} and task.max_tokens == 4
