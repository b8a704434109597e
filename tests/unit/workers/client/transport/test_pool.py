"""The arrival transport's pool closes idle connections (workers/client/transport/pool.py):
on its idle timer and, at a stage's end, those no running stage can use."""

from __future__ import annotations

import asyncio

import httpx

from workers.client.transport import ArrivalTransport
from workers.runtime.event_loop import new_loop


async def _serve() -> tuple[asyncio.AbstractServer, list[asyncio.StreamWriter], str]:
    connected: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.append(writer)
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                if head.startswith(b"GET /slow"):
                    await asyncio.sleep(0.5)  # longer than the tests' idle expiry
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client closed it
        finally:
            connected.remove(writer)
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, connected, f"http://127.0.0.1:{port}/"


async def _until(condition: object, timeout_s: float = 30) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():  # type: ignore[operator]
            await asyncio.sleep(0.02)


def test_the_idle_timer_closes_connections_without_any_further_request() -> None:
    async def main() -> None:
        server, connected, url = await _serve()
        transport = ArrivalTransport(keepalive_expiry=0.3)
        try:
            async with httpx.AsyncClient(transport=transport) as http:
                answers = await asyncio.gather(*(http.get(url) for _ in range(6)))
                assert all(a.status_code == 200 for a in answers)
                assert transport.open_connections == 6
                # No request follows: the timer alone closes them, and the server sees it.
                await _until(lambda: transport.open_connections == 0 and not connected)
                # The pool still works, and the timer is armed again by the next release.
                assert (await http.get(url)).status_code == 200
                await _until(lambda: transport.open_connections == 0)
        finally:
            server.close()

    asyncio.Runner(loop_factory=new_loop).run(main())


def test_a_connection_in_use_is_never_closed_by_the_timer() -> None:
    async def main() -> None:
        server, _, url = await _serve()
        transport = ArrivalTransport(keepalive_expiry=0.1)
        try:
            async with httpx.AsyncClient(transport=transport) as http:
                assert (await http.get(url)).status_code == 200  # idle: the timer is armed
                # The slow answer takes longer than the expiry on the same connection:
                # the timer fires meanwhile and leaves the busy connection alone.
                assert (await http.get(url + "slow")).status_code == 200
                assert transport.open_connections == 1
        finally:
            server.close()

    asyncio.Runner(loop_factory=new_loop).run(main())


def test_trim_keeps_what_running_stages_want_and_closes_the_rest() -> None:
    async def main() -> None:
        server, connected, url = await _serve()
        transport = ArrivalTransport()  # default expiry: only trim closes here
        target = httpx.URL(url)
        try:
            async with httpx.AsyncClient(transport=transport) as http:
                transport.opened_or_given_up(target, transport.want(target, 4))  # stage A
                transport.opened_or_given_up(target, transport.want(target, 10))  # stage B
                answers = await asyncio.gather(*(http.get(url) for _ in range(14)))
                assert all(a.status_code == 200 for a in answers)
                assert transport.idle_count(target) == 14
                transport.want(target, -10)  # stage B ended
                assert transport.trim(target) == 10
                assert transport.idle_count(target) == 4  # stage A's stay for it
                await _until(lambda: len(connected) == 4)
                transport.want(target, -4)  # stage A ended too
                assert transport.trim(target) == 4
                assert transport.open_connections == 0
                await _until(lambda: not connected)
        finally:
            server.close()

    asyncio.Runner(loop_factory=new_loop).run(main())
