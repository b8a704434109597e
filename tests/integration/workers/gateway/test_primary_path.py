"""The gateway's primary path over loopback, in this process, with its real capture
process and Redis: answers relayed unbuffered, oversized bodies refused, and a capture
process that cannot keep up costing counted captures, never an answer."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import httpx
import orjson
import pytest
from aiohttp import web
from redis.asyncio import Redis

from api.local.redis_server import RedisServer
from scenarios.gateway_config import parse_gateway_config
from scenarios.wire.contract import RecordBatch, captures_stream, decode_captures, records_stream
from scenarios.wire.records import ipc_to_table
from workers.gateway.server import Gateway
from workers.runtime.event_loop import new_loop

pytestmark = pytest.mark.integration

T = TypeVar("T")
EVENT = b'data: {"choices":[{"index":0,"delta":{"content":"tok"}}]}\n\n'
DONE = b"data: [DONE]\n\n"


def run(coro: Coroutine[Any, Any, T]) -> T:
    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(coro)


def make_gateway(redis_url: str, primary: dict[str, Any], **kwargs: Any) -> Gateway:
    config = parse_gateway_config(
        {
            "primary": primary,
            "shadows": [],
            "regions": [f"pp-{uuid.uuid4().hex[:6]}"],
            "sample_rate": 0.0,
            "privacy": {"store_text": True},
        }
    )
    return Gateway(config, f"sess-{uuid.uuid4().hex[:8]}", "gw-pp", redis_url, **kwargs)


@asynccontextmanager
async def serving(gateway: Gateway) -> AsyncIterator[str]:
    """``gateway`` on a free loopback port; yields its base URL."""
    await gateway.start()
    try:
        server = await gateway.listen("127.0.0.1", 0)
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        server.close()
    finally:
        await gateway.stop()


@asynccontextmanager
async def stepped_primary() -> AsyncIterator[tuple[str, asyncio.Event]]:
    """A primary that sends one SSE event, then waits for the test's go before the rest."""
    go = asyncio.Event()

    async def chat(request: web.Request) -> web.StreamResponse:
        await request.read()
        answer = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await answer.prepare(request)
        await answer.write(EVENT)
        await go.wait()
        await answer.write(EVENT + DONE)
        await answer.write_eof()
        return answer

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}/v1", go
    finally:
        await runner.cleanup()


def test_an_event_reaches_the_client_before_the_primary_sends_the_next(
    redis_server: RedisServer,
) -> None:
    """Unbuffered: the first event arrives while the primary is still holding the second;
    a buffering proxy would never deliver it and the wait below would time out."""

    async def go() -> tuple[bytes, bytes, dict[str, Any]]:
        async with stepped_primary() as (primary_url, proceed):
            gateway = make_gateway(
                redis_server.url,
                {"name": "prod", "kind": "openai", "base_url": primary_url, "model": "m"},
            )
            async with serving(gateway) as base, httpx.AsyncClient(timeout=30) as client:
                body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
                async with client.stream(
                    "POST", f"{base}/v1/chat/completions", json={**body, "stream": True}
                ) as answer:
                    pieces = answer.aiter_raw()
                    first = b""
                    async with asyncio.timeout(20):
                        while EVENT not in first:
                            first += await anext(pieces)
                    proceed.set()
                    rest = b"".join([piece async for piece in pieces])
                stats = (await client.get(f"{base}/gateway/stats")).json()
        return first, rest, stats

    first, rest, stats = run(go())
    assert first == EVENT
    assert rest == EVENT + DONE
    assert stats["requests"] == 1
    assert stats["capture"]["captured"] == 1


def test_a_body_over_the_cap_is_refused_with_413(redis_server: RedisServer) -> None:
    cap = 64 * 1024
    primary = {"name": "prod", "kind": "simulated", "simulate": {"ttft_ms": 1, "itl_ms": 1}}

    async def go() -> dict[str, Any]:
        got: dict[str, Any] = {}
        async with serving(make_gateway(redis_server.url, primary, max_body_bytes=cap)) as base:
            port = int(base.rsplit(":", 1)[1])
            # Announced: refused from the head, before any of the body is read.
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                b"POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\n"
                b"content-type: application/json\r\ncontent-length: %d\r\n\r\n" % (cap + 1)
            )
            await writer.drain()
            got["announced"] = await asyncio.wait_for(reader.read(), 20)
            writer.close()
            async with httpx.AsyncClient(base_url=base, timeout=30) as client:
                text = "x" * (cap + 1024)
                messages = [{"role": "user", "content": text}]

                async def chunked() -> AsyncIterator[bytes]:
                    # No content-length: the cap is found while the body streams in.
                    yield orjson.dumps({"model": "m", "messages": messages})

                got["streamed"] = await client.post(
                    "/v1/chat/completions",
                    content=chunked(),
                    headers={"content-type": "application/json"},
                )
                small = [{"role": "user", "content": "x" * (cap // 2)}]
                got["under"] = await client.post(
                    "/v1/chat/completions", json={"model": "m", "messages": small, "max_tokens": 2}
                )
                got["stats"] = (await client.get("/gateway/stats")).json()
        return got

    got = run(go())
    head, _, body = got["announced"].partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413 ")
    assert orjson.loads(body)["error"]["code"] == 413
    assert got["streamed"].status_code == 413
    assert str(cap) in got["streamed"].json()["error"]["message"]
    assert got["under"].status_code == 200
    assert got["stats"]["too_large"] == 2
    assert got["stats"]["requests"] == 1


def test_a_stalled_capture_costs_counted_captures_never_answers(
    redis_server: RedisServer,
) -> None:
    """The capture process is stopped (SIGSTOP) while requests with large bodies go
    through a small hand-off buffer: every request is answered, the captures that did not
    fit are dropped and counted, and once the process runs again, every capture that was
    handed over is published to Redis as a record and a capture row."""
    requests = 40
    padding = "y" * 60_000  # each request's begin frame carries its body
    primary = {"name": "prod", "kind": "simulated", "simulate": {"ttft_ms": 1, "itl_ms": 1}}
    gateway = make_gateway(redis_server.url, primary, handoff_bytes=256 * 1024)

    async def go() -> dict[str, Any]:
        got: dict[str, Any] = {"statuses": []}
        async with serving(gateway) as base:
            pid = gateway.capture_pid
            assert pid is not None
            os.kill(pid, signal.SIGSTOP)
            try:
                async with httpx.AsyncClient(base_url=base, timeout=30) as client:
                    for n in range(requests):
                        answer = await client.post(
                            "/v1/chat/completions",
                            json={
                                "model": "m",
                                "messages": [{"role": "user", "content": f"{n} {padding}"}],
                                "max_tokens": 2,
                                "stream": True,
                            },
                        )
                        got["statuses"].append(answer.status_code)
                    got["while_stalled"] = gateway.handoff.snapshot()
            finally:
                os.kill(pid, signal.SIGCONT)
            async with httpx.AsyncClient(base_url=base, timeout=30) as client:
                got["stats"] = (await client.get("/gateway/stats")).json()
        # Stopped: the capture process published everything it had.
        store = Redis.from_url(redis_server.url)
        try:
            batches = [
                RecordBatch.decode(f) for _, f in await store.xrange(records_stream(gateway.run_id))
            ]
            got["records"] = sum(ipc_to_table(b.ipc).num_rows for b in batches)
            got["captures"] = [
                row
                for _, f in await store.xrange(captures_stream(gateway.run_id))
                for row in decode_captures(f)
            ]
        finally:
            await store.aclose()
        return got

    got = run(go())
    assert got["statuses"] == [200] * requests
    stalled = got["while_stalled"]
    assert stalled["requests_dropped"] > 0
    assert stalled["buffered_bytes"] <= stalled["max_buffer_bytes"]
    capture = got["stats"]["capture"]
    assert capture["requests_dropped"] == stalled["requests_dropped"]
    # Each request is either captured or counted as dropped, never both, never neither.
    assert capture["captured"] + capture["requests_dropped"] == requests
    assert capture["captured"] > 0
    assert got["records"] == capture["captured"]
    assert len(got["captures"]) == capture["captured"]
    assert all(row["messages"] for row in got["captures"])


def test_unknown_routes_and_methods_get_json_errors(redis_server: RedisServer) -> None:
    primary = {"name": "prod", "kind": "simulated", "simulate": {"ttft_ms": 1, "itl_ms": 1}}

    async def go() -> list[httpx.Response]:
        async with (
            serving(make_gateway(redis_server.url, primary)) as base,
            httpx.AsyncClient(base_url=base, timeout=30) as client,
        ):
            return [
                await client.get("/nope"),
                await client.get("/v1/chat/completions"),
                await client.post("/v1/chat/completions", content=b"not json"),
            ]

    missing, method, invalid = run(go())
    assert missing.status_code == 404 and missing.json()["error"]["code"] == 404
    assert method.status_code == 405
    assert invalid.status_code == 400
    assert invalid.json()["error"]["type"] == "invalid_request_error"
