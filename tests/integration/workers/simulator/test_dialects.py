"""The simulator's hosted-API routes over loopback HTTP: each dialect's stream with its
request-id header, its error bodies for seeded faults (a 429 keeps its Retry-After),
streams cut short, requests it does not serve, and the request log."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import httpx
import orjson
import pytest

from scenarios.providers.simulate import SimulateSpec
from workers.runtime.event_loop import new_loop
from workers.simulator.server import SimulatorApp, start_server

pytestmark = pytest.mark.integration

T = TypeVar("T")
PATHS = {
    "anthropic": "/v1/messages",
    "openai-responses": "/v1/responses",
    "gemini": "/v1beta/models/sim-gemini:streamGenerateContent?alt=sse",
}
BODIES: dict[str, dict[str, Any]] = {
    "anthropic": {
        "model": "m",
        "max_tokens": 4,
        "stream": True,
        "messages": [{"role": "user", "content": "three word prompt"}],
    },
    "openai-responses": {
        "model": "m",
        "max_output_tokens": 4,
        "stream": True,
        "input": [{"role": "user", "content": "three word prompt"}],
    },
    "gemini": {
        "contents": [{"role": "user", "parts": [{"text": "three word prompt"}]}],
        "generationConfig": {"maxOutputTokens": 4},
    },
}
REQUEST_ID = {"anthropic": "request-id", "openai-responses": "x-request-id", "gemini": None}


@asynccontextmanager
async def serving(app: SimulatorApp) -> AsyncIterator[httpx.AsyncClient]:
    server = await start_server(app)
    port = server.sockets[0].getsockname()[1]
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            yield client
    finally:
        server.close()
        await server.wait_closed()


def run(coro: Coroutine[Any, Any, T]) -> T:
    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(coro)


def spec(**fields: Any) -> SimulateSpec:
    return SimulateSpec.model_validate({"ttft_ms": 2, "itl_ms": 1, **fields})


def post(app: SimulatorApp, kind: str, body: dict[str, Any] | None = None) -> httpx.Response:
    async def go() -> httpx.Response:
        async with serving(app) as client:
            return await client.post(PATHS[kind], content=orjson.dumps(body or BODIES[kind]))

    return run(go())


@pytest.mark.parametrize("kind", sorted(PATHS))
def test_a_stream_with_its_request_id_header(kind: str) -> None:
    app = SimulatorApp(spec(prefix_cache=True))
    answer = post(app, kind)
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "text/event-stream"
    header = REQUEST_ID[kind]
    if header is not None:
        assert answer.headers[header].startswith("req_sim_")
    data = [
        orjson.loads(line.removeprefix("data: "))
        for line in answer.text.splitlines()
        if line.startswith("data: ")
    ]
    last = data[-1]
    if kind == "anthropic":
        assert last == {"type": "message_stop"}
        assert data[0]["message"]["usage"]["cache_read_input_tokens"] == 0
    elif kind == "openai-responses":
        assert last["type"] == "response.incomplete"
        assert last["response"]["usage"]["input_tokens"] == 3
        assert last["response"]["usage"]["output_tokens"] == 4
    else:
        assert last["candidates"][0]["finishReason"] == "MAX_TOKENS"
        assert last["usageMetadata"]["promptTokenCount"] == 3
        assert last["usageMetadata"]["cachedContentTokenCount"] == 0
    entries = orjson.loads(app.log.page_json(0, 10))
    assert len(entries["entries"]) == 1


@pytest.mark.parametrize("kind", sorted(PATHS))
def test_a_seeded_429_is_the_dialects_error_body_with_retry_after(kind: str) -> None:
    app = SimulatorApp(spec(faults=[{"kind": "http_429", "rate": 1, "retry_after_s": 3}]))
    answer = post(app, kind)
    assert answer.status_code == 429
    assert answer.headers["retry-after"] == "3"
    assert "error" in answer.json()


@pytest.mark.parametrize("kind", sorted(PATHS))
def test_a_cut_stream_ends_without_the_dialects_last_event(kind: str) -> None:
    app = SimulatorApp(spec(cut_rate=1))

    async def go() -> bytes:
        async with serving(app) as client:
            body = orjson.dumps(BODIES[kind])
            received = b""
            try:
                async with client.stream("POST", PATHS[kind], content=body) as answer:
                    async for chunk in answer.aiter_raw():
                        received += chunk
            except httpx.HTTPError:
                pass  # the connection closed mid-body
            return received

    received = run(go())
    assert b"message_stop" not in received and b"response.incomplete" not in received
    assert b"finishReason" not in received


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("/v1/messages", {"model": "m", "max_tokens": 4, "messages": "x"}, 400),
        ("/v1/messages", {**BODIES["anthropic"], "stream": False}, 400),
        ("/v1beta/models/m:streamGenerateContent", BODIES["gemini"], 400),  # no alt=sse
        ("/v1beta/models/m:generateContent?alt=sse", BODIES["gemini"], 404),
        ("/v1/responses", {"model": "m"}, 400),
    ],
)
def test_requests_it_does_not_serve(path: str, body: dict[str, Any], status: int) -> None:
    async def go() -> httpx.Response:
        async with serving(SimulatorApp(spec())) as client:
            return await client.post(path, content=orjson.dumps(body))

    answer = run(go())
    assert answer.status_code == status
    assert "error" in answer.json()
