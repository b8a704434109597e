"""The simulated OpenAI-compatible endpoint over loopback HTTP: SSE streams with usage,
plain answers, the side routes, and seeded faults."""

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
from workers.simulator import FixedLatency  # the package exports the latency models
from workers.simulator.server import SimulatorApp, start_server

pytestmark = pytest.mark.integration

T = TypeVar("T")
CHAT = {"model": "x", "messages": [{"role": "user", "content": "three word prompt"}]}


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


def events(text: str) -> list[Any]:
    data = [line.removeprefix("data: ") for line in text.split("\n\n") if line.startswith("data: ")]
    return [d if d == "[DONE]" else orjson.loads(d) for d in data]


def spec(**fields: Any) -> SimulateSpec:
    return SimulateSpec.model_validate({"ttft_ms": 2, "itl_ms": 1, **fields})


def test_stream_sends_role_tokens_finish_usage_and_done() -> None:
    async def go() -> tuple[httpx.Response, str]:
        async with serving(SimulatorApp(spec(tokens_per_chunk=2), model="sim-1")) as client:
            body = {
                **CHAT,
                "stream": True,
                "max_tokens": 5,
                "stream_options": {"include_usage": True},
            }
            response = await client.post("/v1/chat/completions", json=body)
            return response, response.text

    response, text = run(go())
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    role, *tokens, finish, usage, done = events(text)
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [t["choices"][0]["delta"]["content"] for t in tokens] == [" tok tok", " tok tok", " tok"]
    assert all(t["model"] == "sim-1" for t in tokens)
    assert finish["choices"][0]["finish_reason"] == "length"
    assert usage["choices"] == []
    # Prompt tokens are its words.
    assert usage["usage"] == {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
    assert done == "[DONE]"


def test_stream_without_usage_and_a_plain_answer() -> None:
    async def go() -> tuple[str, dict[str, Any]]:
        async with serving(SimulatorApp(spec())) as client:
            streamed = await client.post(
                "/v1/chat/completions", json={**CHAT, "stream": True, "max_completion_tokens": 3}
            )
            plain = await client.post("/v1/chat/completions", json={**CHAT, "max_tokens": 4})
            return streamed.text, plain.json()

    streamed, plain = run(go())
    assert not any("usage" in e for e in events(streamed) if e != "[DONE]")
    assert len(events(streamed)) == 1 + 3 + 1 + 1  # role, tokens, finish, [DONE]
    assert plain["object"] == "chat.completion"
    assert plain["choices"][0]["message"]["content"] == " tok" * 4
    assert plain["usage"]["completion_tokens"] == 4


def test_side_routes_and_bad_requests() -> None:
    async def go() -> dict[str, httpx.Response]:
        async with serving(SimulatorApp(spec(), model="sim-2")) as client:
            return {
                "health": await client.get("/health"),
                "models": await client.get("/v1/models"),
                "stats": await client.get("/v1/simulator/stats"),
                "missing": await client.get("/v1/nothing"),
                "not json": await client.post("/v1/chat/completions", content=b"{oops"),
                "no messages": await client.post("/v1/chat/completions", json={"model": "m"}),
            }

    answers = run(go())
    assert answers["health"].json() == {"status": "ok"}
    assert [m["id"] for m in answers["models"].json()["data"]] == ["sim-2"]
    assert answers["stats"].json() == {"latency_model": "fixed"}
    assert answers["missing"].status_code == 404
    assert answers["not json"].status_code == answers["no messages"].status_code == 400


def test_error_faults_are_seeded_and_rate_limits_say_when_to_retry() -> None:
    async def statuses(seed: int) -> list[int]:
        app = SimulatorApp(spec(error_rate=0.5, error_status=429, seed=seed))
        async with serving(app) as client:
            answers = [
                await client.post("/v1/chat/completions", json={**CHAT, "max_tokens": 1})
                for _ in range(24)
            ]
        assert all(a.headers["retry-after"] == "1" for a in answers if a.status_code == 429)
        return [a.status_code for a in answers]

    async def three() -> list[list[int]]:
        return list(await asyncio.gather(statuses(7), statuses(7), statuses(8)))

    first, again, other = run(three())
    assert first == again  # the same seed fails the same requests
    assert first != other
    assert set(first) == {200, 429}


def test_a_cut_stream_ends_without_its_terminal_chunk() -> None:
    async def go() -> tuple[list[str], BaseException | None]:
        received: list[str] = []
        async with serving(SimulatorApp(spec(cut_rate=1.0))) as client:
            body = {**CHAT, "stream": True, "max_tokens": 10}
            try:
                async with client.stream("POST", "/v1/chat/completions", json=body) as response:
                    async for text in response.aiter_text():
                        received.append(text)
            except httpx.RemoteProtocolError as exc:
                return received, exc
        return received, None

    received, error = run(go())
    assert isinstance(error, httpx.RemoteProtocolError)  # the body ended early
    text = "".join(received)
    assert "[DONE]" not in text and 0 < text.count(" tok") < 10


def test_a_latency_model_can_be_plugged_in() -> None:
    async def go() -> dict[str, Any]:
        app = SimulatorApp(spec(), latency=FixedLatency(0.0, 0.0, tokens_per_chunk=4))
        async with serving(app) as client:
            response = await client.post("/v1/chat/completions", json={**CHAT, "max_tokens": 9})
            return dict(response.json())

    assert run(go())["usage"]["completion_tokens"] == 9


def test_an_unfinished_answer_stops_halfway_and_ends_with_done_but_no_finish_reason() -> None:
    async def go() -> str:
        async with serving(SimulatorApp(spec(unfinished_rate=1.0))) as client:
            body = {
                **CHAT,
                "stream": True,
                "max_tokens": 10,
                "stream_options": {"include_usage": True},
            }
            response = await client.post("/v1/chat/completions", json=body)
            assert response.status_code == 200  # the body itself ends in good order
            return response.text

    role, *tokens, done = events(run(go()))
    assert done == "[DONE]"
    assert 0 < len(tokens) < 10
    assert all(t["choices"][0]["finish_reason"] is None for t in [role, *tokens])
    assert all("usage" not in t for t in tokens)


def test_stream_usage_off_streams_no_usage_even_when_asked() -> None:
    async def go() -> str:
        async with serving(SimulatorApp(spec(stream_usage=False))) as client:
            body = {
                **CHAT,
                "stream": True,
                "max_tokens": 3,
                "stream_options": {"include_usage": True},
            }
            return (await client.post("/v1/chat/completions", json=body)).text

    role, *tokens, finish, done = events(run(go()))
    assert len(tokens) == 3 and done == "[DONE]"
    assert finish["choices"][0]["finish_reason"] == "length"
    assert all("usage" not in event for event in [role, *tokens, finish])


def test_reset_prefix_cache_empties_the_cache_over_http() -> None:
    long_chat = {
        "model": "x",
        "max_tokens": 2,
        "messages": [{"role": "user", "content": " ".join(f"w{i}" for i in range(64))}],
    }

    async def go() -> tuple[list[Any], dict[str, Any], int]:
        app = SimulatorApp(spec(prefix_cache=True), latency=FixedLatency(2, 1))
        cached = []
        async with serving(app) as client:
            for path in ("", "", "/reset_prefix_cache", ""):
                if path:
                    reset = await client.post(path)
                    continue
                answer = await client.post("/v1/chat/completions", json=long_chat)
                cached.append(answer.json()["usage"]["prompt_tokens_details"]["cached_tokens"])
            stats = orjson.loads((await client.get("/v1/simulator/stats")).content)
        return cached, stats["prefix_cache"], reset.status_code

    cached, stats, status = run(go())
    # Cold, then found (whole blocks of the 64 words after the role marker), then cold again.
    assert status == 200
    assert cached[0] == 0 and cached[1] > 0 and cached[2] == 0
    assert stats["resets"] == 1 and stats["blocks"] > 0  # the last request stored again
