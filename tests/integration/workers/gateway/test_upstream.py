"""The gateway's upstream pool against a real loopback HTTP/1.1 server."""

from __future__ import annotations

import asyncio

from workers.gateway.upstream import Origin, UpstreamPool


class Recorder:
    """A receiver that keeps what the connection hands it and says when it ended."""

    def __init__(self) -> None:
        self.status = 0
        self.body = b""
        self.stamps: list[int] = []
        self.lost: str | None = None
        self.ended = asyncio.Event()

    def on_head(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.status = status

    def on_body(self, chunk: bytes, stamp: int) -> None:
        self.body += chunk
        self.stamps.append(stamp)

    def on_end(self) -> None:
        self.ended.set()

    def flush(self) -> None:
        pass

    def on_lost(self, reason: str, got_head: bool) -> None:
        self.lost = reason
        self.ended.set()


async def _serve(handler: object) -> tuple[asyncio.Server, int]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)  # type: ignore[arg-type]
    return server, server.sockets[0].getsockname()[1]


def test_origin_of_a_base_url() -> None:
    assert Origin.of("http://127.0.0.1:8000/v1/") == Origin("127.0.0.1", 8000, False, "/v1")
    assert Origin.of("https://api.example.com/v1").port == 443
    assert Origin.of("https://api.example.com/v1").host_header == "api.example.com"
    assert Origin.of("http://h:8080").host_header == "h:8080"


def test_a_chunked_answer_arrives_whole_and_the_connection_is_reused() -> None:
    accepted = 0
    served = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                writer.write(
                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
                )
                await writer.drain()
        except asyncio.IncompleteReadError:  # the pool closed the connection
            pass
        finally:
            writer.close()
            served.set()

    async def main() -> tuple[list[Recorder], int]:
        server, port = await _serve(handler)
        pool = UpstreamPool(Origin.of(f"http://127.0.0.1:{port}/v1"), connect_timeout_s=5)
        answers = []
        for _ in range(3):
            connection = pool.take() or await pool.connect()
            answer = Recorder()
            connection.send(b"GET /v1/x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", answer)
            await asyncio.wait_for(answer.ended.wait(), 10)
            answers.append(answer)
        pool.close()
        await asyncio.wait_for(served.wait(), 10)
        server.close()
        await server.wait_closed()
        return answers, pool.opened

    answers, opened = asyncio.run(main())
    for answer in answers:
        assert (answer.status, answer.body, answer.lost) == (200, b"hello world", None)
        assert answer.stamps == sorted(answer.stamps) and answer.stamps[0] > 0
    assert opened == 1 and accepted == 1  # kept alive: one connection served all three


def test_an_answer_cut_short_is_lost_not_ended() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
        await writer.drain()
        writer.close()
        await writer.wait_closed()

    async def main() -> Recorder:
        server, port = await _serve(handler)
        pool = UpstreamPool(Origin.of(f"http://127.0.0.1:{port}"), connect_timeout_s=5)
        connection = await pool.connect()
        answer = Recorder()
        connection.send(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", answer)
        await asyncio.wait_for(answer.ended.wait(), 10)
        assert pool.take() is None  # a broken connection never goes back to the pool
        server.close()
        await server.wait_closed()
        return answer

    answer = asyncio.run(main())
    assert answer.body == b"partial"
    assert answer.lost is not None and "mid-answer" in answer.lost
