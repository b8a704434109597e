"""Connection pre-warm against a real loopback server (workers/client/prewarm.py)."""

from __future__ import annotations

import asyncio
import socket

import httpx

from workers.client.http import make_client
from workers.client.prewarm import arrival_transport, prewarmed
from workers.runtime.event_loop import new_loop


async def _serve() -> tuple[asyncio.AbstractServer, list[int], str]:
    accepted: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        while await reader.readuntil(b"\r\n\r\n"):
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            await writer.drain()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, accepted, f"http://127.0.0.1:{port}/v1"


def test_prewarm_opens_the_missing_connections_in_batches_and_requests_reuse_them() -> None:
    async def main() -> None:
        server, accepted, url = await _serve()
        http = make_client()
        transport = arrival_transport(http)
        assert transport is not None
        target = httpx.URL(url)
        try:
            async with prewarmed(http, url, 10, batch=4) as first:
                await asyncio.sleep(0.05)  # let the server's accept callbacks run
                assert first.connections == 10 and len(accepted) == 10
                assert first.fields()["prewarmed_connections"] == 10
                # A second stage running at the same time wants its own: the count is
                # shared per origin, so only its 12 are opened, the first's stay its own.
                async with prewarmed(http, url + "/other", 12, batch=4) as second:
                    assert second.connections == 12
                    answers = await asyncio.gather(*(http.get(url) for _ in range(22)))
                    assert all(answer.status_code == 200 for answer in answers)
                    assert len(accepted) == 22  # every request found a warm connection
                # The second stage ended: what it opened is closed, the first keeps its 10.
                assert transport.idle_count(target) == 10
            # Both ended: nothing stays open for stages that no longer run.
            assert transport.idle_count(target) == 0 and transport.open_connections == 0
            # Two stages warming at the same time: between them they open their 35,
            # none of it twice.
            release = asyncio.Event()
            opened: list[int] = []

            async def stage(count: int) -> None:
                async with prewarmed(http, url, count, batch=4) as warmed:
                    opened.append(warmed.connections)
                    await release.wait()

            tasks = [asyncio.create_task(stage(30)), asyncio.create_task(stage(5))]
            while len(opened) < 2:
                await asyncio.sleep(0.01)
            assert sum(opened) == 35 and transport.idle_count(target) == 35
            release.set()
            await asyncio.gather(*tasks)
            assert transport.open_connections == 0
        finally:
            await http.aclose()
            server.close()

    asyncio.Runner(loop_factory=new_loop).run(main())


def test_without_warming_the_count_is_registered_and_the_stage_leaves_nothing_open() -> None:
    async def main() -> None:
        server, accepted, url = await _serve()
        http = make_client()
        transport = arrival_transport(http)
        assert transport is not None
        try:
            async with prewarmed(http, url, 8, warm=False) as result:
                assert result.connections == 0 and not accepted
                answers = await asyncio.gather(*(http.get(url) for _ in range(8)))
                assert all(answer.status_code == 200 for answer in answers)
                assert transport.idle_count(httpx.URL(url)) == 8  # reused within the stage
            assert transport.open_connections == 0
        finally:
            await http.aclose()
            server.close()

    asyncio.Runner(loop_factory=new_loop).run(main())


def test_a_refused_endpoint_stops_the_warm_up_without_raising() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there

    async def main() -> None:
        http = make_client()
        try:
            async with prewarmed(http, f"http://127.0.0.1:{port}", 100, batch=8) as result:
                assert result.connections == 0
        finally:
            await http.aclose()

    asyncio.Runner(loop_factory=new_loop).run(main())


def test_other_clients_are_left_alone() -> None:
    async def main() -> None:
        async with (
            httpx.AsyncClient() as http,
            prewarmed(http, "http://127.0.0.1:9", 10) as result,
        ):
            assert result.connections == 0

    asyncio.Runner(loop_factory=new_loop).run(main())
