"""Connection phases stamped by the arrival transport (workers/client/transport/phases.py),
against scripted loopback servers in a thread (tests/fakes/scripted_server.py):
a new connection's DNS, connect and TLS, a reused connection's none, the moment the
request was written, and new vs reused. Assertions are on the order of stamps (and on
causality across the server's thread, same clock), never on elapsed time."""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from api.local.redis_server import free_port
from tests.fakes.scripted_server import ScriptedServer, ok, read_request
from tests.fakes.tls import self_signed
from workers.client.transport import ArrivalTransport
from workers.client.transport.phases import PHASES_EXTENSION, Phases


@pytest.fixture
def servers() -> Iterator[list[ScriptedServer]]:
    started: list[ScriptedServer] = []
    yield started
    for server in started:
        server.close()


def serving(conn: socket.socket, answers: int) -> None:
    for n in range(answers):
        read_request(conn)
        conn.sendall(ok(b"answer %d" % n))


async def send(http: httpx.AsyncClient, url: str, body: bytes = b"x") -> Phases:
    phases = Phases()
    response = await http.post(url, content=body, extensions={PHASES_EXTENSION: phases})
    assert response.status_code == 200
    return phases


def test_a_new_connection_has_connect_stamps_and_a_reused_one_none(
    servers: list[ScriptedServer],
) -> None:
    server = ScriptedServer(lambda conn: serving(conn, 3))
    servers.append(server)

    async def go() -> list[tuple[int, Phases]]:
        out = []
        async with httpx.AsyncClient(transport=ArrivalTransport()) as http:
            for _ in range(3):
                before = time.perf_counter_ns()
                out.append((before, await send(http, server.url())))
        return out

    (before, first), *rest = asyncio.run(go())
    assert server.accepted == 1
    assert first.connection_new is True
    assert first.dns_start is None and first.dns_end is None  # an IP address: no lookup
    assert first.tls_start is None and first.tls_end is None  # http
    assert first.connect_start is not None and first.connect_end is not None
    assert first.request_written is not None
    assert before <= first.connect_start <= first.connect_end <= first.request_written
    for start, reused in rest:
        assert reused.connection_new is False
        assert (reused.dns_start, reused.connect_start, reused.tls_start) == (None, None, None)
        assert reused.connect_end is None and reused.tls_end is None
        assert reused.request_written is not None and reused.request_written >= start


def test_tls_by_name_stamps_dns_connect_and_handshake_in_order(
    servers: list[ScriptedServer], tmp_path: Path
) -> None:
    cert, key = self_signed(tmp_path, "localhost")
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    server = ScriptedServer(lambda conn: serving(conn, 2), tls=server_context)
    servers.append(server)
    trusted = ssl.create_default_context(cafile=str(cert))

    async def go() -> list[Phases]:
        async with httpx.AsyncClient(transport=ArrivalTransport(verify=trusted)) as http:
            return [await send(http, server.url()), await send(http, server.url())]

    first, second = asyncio.run(go())
    assert server.url().startswith("https://localhost:")  # a name: resolved
    stamps = [first.dns_start, first.dns_end, first.connect_start, first.connect_end,
              first.tls_start, first.tls_end, first.request_written]  # fmt: skip
    assert None not in stamps
    assert stamps == sorted(stamps)  # type: ignore[type-var]
    assert first.connection_new is True
    assert second.connection_new is False
    assert (second.dns_start, second.connect_start, second.tls_start) == (None, None, None)
    assert second.request_written is not None


def test_a_body_larger_than_the_socket_buffers_is_written_when_the_server_reads_it(
    servers: list[ScriptedServer],
) -> None:
    # The server starts reading only after a pause: all of a 16 MB body cannot be in the
    # kernel's buffers before that, so the written stamp comes after the server began.
    began: list[int] = []

    def slow_reader(conn: socket.socket) -> None:
        time.sleep(0.2)
        began.append(time.perf_counter_ns())
        read_request(conn)
        conn.sendall(ok())

    server = ScriptedServer(slow_reader)
    servers.append(server)

    async def go() -> Phases:
        async with httpx.AsyncClient(transport=ArrivalTransport()) as http:
            return await send(http, server.url(), b"b" * (16 * 1024 * 1024))

    phases = asyncio.run(go())
    assert phases.request_written is not None and began
    assert phases.request_written >= began[0]


def test_a_stale_connection_replaced_records_the_new_one(servers: list[ScriptedServer]) -> None:
    closed = threading.Event()

    def answer_then_close(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(ok(b"first"))
        conn.shutdown(socket.SHUT_RDWR)
        closed.set()

    server = ScriptedServer(answer_then_close, lambda conn: serving(conn, 1))
    servers.append(server)

    async def go() -> tuple[Phases, Phases]:
        async with httpx.AsyncClient(transport=ArrivalTransport()) as http:
            first = await send(http, server.url())
            assert closed.wait(10)  # the client has not seen the FIN when it reuses
            return first, await send(http, server.url())

    first, second = asyncio.run(go())
    assert server.accepted == 2
    assert first.connection_new is True and second.connection_new is True
    assert second.connect_start is not None and second.connect_end is not None
    assert second.request_written is not None
    assert second.connect_end <= second.request_written


def test_a_refused_connect_keeps_its_start_and_no_end() -> None:
    async def go() -> Phases:
        phases = Phases()
        async with httpx.AsyncClient(transport=ArrivalTransport()) as http:
            with pytest.raises(httpx.ConnectError):
                await http.get(
                    f"http://127.0.0.1:{free_port()}/", extensions={PHASES_EXTENSION: phases}
                )
        return phases

    phases = asyncio.run(go())
    assert phases.connection_new is True
    assert phases.connect_start is not None and phases.connect_end is None
    assert phases.request_written is None


def test_a_pre_warmed_connection_is_not_new_for_the_request_that_uses_it(
    servers: list[ScriptedServer],
) -> None:
    server = ScriptedServer(lambda conn: serving(conn, 1))
    servers.append(server)

    async def go() -> Phases:
        transport = ArrivalTransport()
        async with httpx.AsyncClient(transport=transport) as http:
            assert transport.want(httpx.URL(server.url()), 1) == 1
            await transport.open_idle(httpx.URL(server.url()), 5.0)
            return await send(http, server.url())

    phases = asyncio.run(go())
    assert server.accepted == 1
    assert phases.connection_new is False and phases.connect_start is None
