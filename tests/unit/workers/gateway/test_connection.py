"""A gateway client connection: requests parsed, answered in order, oversized ones refused.

The connection is driven as asyncio drives it (``connection_made``, ``data_received``)
with a transport that keeps what is written, and a gateway that records the requests it
is asked to route (the routes themselves: tests/integration/workers/gateway/).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, cast

from workers.gateway.connection import MAX_HEAD_BYTES, ClientConnection, Request


class Transport:
    def __init__(self) -> None:
        self.written = bytearray()
        self.closed = self.aborted = False

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        pass


@dataclass
class Stats:
    bad_requests: int = 0
    too_large: int = 0


@dataclass
class Gateway:
    max_body_bytes: int = 1024
    stopping: bool = False
    stats: Stats = field(default_factory=Stats)
    clients: set[Any] = field(default_factory=set)
    routed: list[Request] = field(default_factory=list)

    def route(self, client: ClientConnection, request: Request) -> None:
        self.routed.append(request)


def connect(gateway: Gateway) -> tuple[ClientConnection, Transport]:
    client = ClientConnection(cast(Any, gateway))
    transport = Transport()
    client.connection_made(cast(Any, transport))
    return client, transport


def test_pipelined_requests_are_answered_one_at_a_time_in_order() -> None:
    async def scenario() -> None:
        gateway = Gateway()
        client, transport = connect(gateway)
        client.data_received(
            b"GET /v1/models HTTP/1.1\r\nhost: x\r\n\r\n"
            b"POST /v1/chat/completions?x=1 HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}"
        )
        assert [r.path for r in gateway.routed] == [b"/v1/models"]
        client.respond(200, b"{}")
        await asyncio.sleep(0)  # the next request is answered on the next loop turn
        assert [r.path for r in gateway.routed] == [b"/v1/models", b"/v1/chat/completions"]
        second = gateway.routed[1]
        assert (second.method, second.body, second.keep_alive, second.http11) == (
            b"POST",
            b"{}",
            True,
            True,
        )
        assert transport.written.startswith(b"HTTP/1.1 200 OK\r\ncontent-type: application/json")
        assert client in gateway.clients

    asyncio.run(scenario())


def test_an_announced_oversized_body_is_refused_before_it_is_read() -> None:
    async def scenario() -> None:
        gateway = Gateway(max_body_bytes=10)
        client, transport = connect(gateway)
        client.data_received(b"POST /v1/chat/completions HTTP/1.1\r\ncontent-length: 11\r\n\r\n")
        assert transport.written.startswith(b"HTTP/1.1 413 Request Entity Too Large")
        assert b"connection: close" in transport.written
        assert gateway.stats.too_large == 1 and not gateway.routed

    asyncio.run(scenario())


def test_an_oversized_head_and_garbage_are_bad_requests() -> None:
    async def scenario() -> None:
        gateway = Gateway()
        client, transport = connect(gateway)
        client.data_received(b"GET /" + b"a" * (MAX_HEAD_BYTES + 1) + b" HTTP/1.1\r\n\r\n")
        assert transport.written.startswith(b"HTTP/1.1 431 ")
        other, garbage = connect(gateway)
        other.data_received(b"\x00\x01 not http\r\n\r\n")
        assert garbage.written.startswith(b"HTTP/1.1 400 Bad Request")
        assert gateway.stats.bad_requests == 2 and not gateway.routed

    asyncio.run(scenario())
