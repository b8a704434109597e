"""The arrival transport's connection pool over loopback: keep-alive reuse and expiry,
no cap on connections per origin, stamped bodies, and closing with bodies in flight.

The server is a few lines of asyncio in this process that counts the connections it
accepts and answers each path its own way."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from time import perf_counter_ns
from typing import Any, TypeVar, cast

import httpx
import pytest

from workers.client.transport.arrival import arrival_of
from workers.client.transport.pool import ArrivalTransport
from workers.runtime.event_loop import new_loop

pytestmark = pytest.mark.integration

T = TypeVar("T")
OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
PARTIAL = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n"
CONCURRENT = 6


class Counting(asyncio.Protocol):
    """One connection of the test server."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing asyncio's.
        self.transport = cast(asyncio.Transport, transport)
        self.server.accepted += 1
        self.server.open += 1

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.open -= 1

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while b"\r\n\r\n" in self.buffer:
            head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
            path = head.split(b" ")[1]
            asyncio.get_running_loop().create_task(self.answer(path))

    async def answer(self, path: bytes) -> None:
        assert self.transport is not None
        if path == b"/together":  # answer once CONCURRENT requests are open at once
            self.server.waiting += 1
            async with asyncio.timeout(30):
                while self.server.waiting < CONCURRENT:
                    await asyncio.sleep(0.01)
        if path == b"/partial":
            self.transport.write(PARTIAL)  # the rest never comes
            return
        self.transport.write(OK)


class Server:
    """Counts of the test server: connections accepted and open, requests held."""

    def __init__(self) -> None:
        self.accepted = 0
        self.open = 0
        self.waiting = 0


@asynccontextmanager
async def serving() -> AsyncIterator[tuple[Server, str]]:
    counts = Server()
    server = await asyncio.get_running_loop().create_server(
        lambda: Counting(counts), "127.0.0.1", 0
    )
    try:
        yield counts, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()


def run(coro: Coroutine[Any, Any, T]) -> T:
    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(coro)


async def sequential(base: str, transport: ArrivalTransport, n: int) -> None:
    async with httpx.AsyncClient(transport=transport, timeout=30) as client:
        for _ in range(n):
            assert (await client.get(f"{base}/ok")).text == "ok"
            await asyncio.sleep(0.01)


def test_an_idle_connection_is_reused_until_it_expires() -> None:
    async def go() -> tuple[int, int]:
        async with serving() as (kept, base):
            await sequential(base, ArrivalTransport(), 3)
        async with serving() as (expired, base):
            await sequential(base, ArrivalTransport(keepalive_expiry=0.0), 3)
        return kept.accepted, expired.accepted

    assert run(go()) == (1, 3)


def test_concurrent_requests_each_get_a_connection_without_a_cap() -> None:
    async def go() -> tuple[list[str], int]:
        async with serving() as (counts, base):
            async with httpx.AsyncClient(transport=ArrivalTransport(), timeout=60) as client:
                answers = await asyncio.gather(
                    *(client.get(f"{base}/together") for _ in range(CONCURRENT))
                )
            return [a.text for a in answers], counts.accepted

    texts, accepted = run(go())
    assert texts == ["ok"] * CONCURRENT and accepted == CONCURRENT


def test_every_body_carries_its_arrival_stamps() -> None:
    async def go() -> tuple[int, int, int, int]:
        async with (
            serving() as (_, base),
            httpx.AsyncClient(transport=ArrivalTransport(), timeout=30) as client,
        ):
            before = perf_counter_ns()
            async with client.stream("GET", f"{base}/ok") as response:
                body = b"".join([chunk async for chunk in response.aiter_raw()])
                stream = arrival_of(response)
                assert body == b"ok" and stream is not None and stream.end is not None
                return before, stream.last, stream.end, perf_counter_ns()

    before, last, end, after = run(go())
    assert before <= last <= end <= after


def test_closing_the_transport_fails_a_body_still_arriving() -> None:
    async def go() -> tuple[bytes, BaseException | None, int]:
        async with serving() as (counts, base):
            transport = ArrivalTransport()
            client = httpx.AsyncClient(transport=transport, timeout=30)
            got, error = b"", None
            async with client.stream("GET", f"{base}/partial") as response:
                chunks = response.aiter_raw()
                got = await anext(chunks)
                await transport.aclose()
                try:
                    async for chunk in chunks:
                        got += chunk
                except httpx.ReadError as exc:
                    error = exc
            await client.aclose()
            await asyncio.sleep(0.05)  # let the server see the close
            return got, error, counts.open

    got, error, still_open = run(go())
    assert got == b"first"
    assert isinstance(error, httpx.ReadError) and "transport closed" in str(error)
    assert still_open == 0


def test_only_http_and_https_are_spoken() -> None:
    async def go() -> None:
        async with httpx.AsyncClient(transport=ArrivalTransport()) as client:
            await client.get("ftp://127.0.0.1/file")

    with pytest.raises(httpx.UnsupportedProtocol):
        run(go())
