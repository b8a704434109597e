"""The arrival-stamping transport on crafted byte streams (workers/client/transport/).

Parsing is checked by feeding a connection bytes split at every offset, each piece with
its own stamp: every SSE event must carry the stamp of the piece that completed it.
Socket behaviour (keep-alive reuse, a stale keep-alive connection, a cut stream, refused
connections, read timeouts, kernel receive stamps, TLS) is checked against a scripted
loopback server running in a thread with blocking sockets, so that it can write while
the client's event loop is deliberately not running. No assertion is on elapsed time.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import socket
import ssl
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.scripted_server import Script, ScriptedServer, ok, read_request
from tests.fakes.tls import self_signed
from workers.client.errors import ErrorClass, classify_exception
from workers.client.sse import SSEDecoder
from workers.client.transport import ArrivalStream, ArrivalTransport, arrival_of
from workers.client.transport.connection import Connection
from workers.runtime.event_loop import new_loop

LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": new_loop}
linux_only = pytest.mark.skipif(sys.platform != "linux", reason="kernel receive stamps")


@pytest.fixture(params=sorted(LOOPS))
def run(request: pytest.FixtureRequest) -> Callable[[Awaitable[Any]], Any]:
    """Run a coroutine on the default asyncio loop and on uvloop."""

    def runner(coroutine: Awaitable[Any]) -> Any:
        with asyncio.Runner(loop_factory=LOOPS[request.param]) as loop:
            return loop.run(coroutine)  # type: ignore[arg-type]

    return runner


# ------------------------------------------------------------------ crafted bytes


def sse(text: str) -> bytes:
    return b"data: " + text.encode() + b"\n\n"


EVENTS = [sse(f'{{"n":{i}}}') for i in range(4)]
CHUNKED = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    + b"%x\r\n%s\r\n" % (len(EVENTS[0]), EVENTS[0])
    # one event in two chunks, upper-case hex and a chunk extension
    + b"%X;ext=1\r\n%s\r\n" % (5, EVENTS[1][:5])
    + b"%x\r\n%s\r\n" % (len(EVENTS[1]) - 5, EVENTS[1][5:])
    # two events in one chunk
    + b"%x\r\n%s\r\n" % (len(EVENTS[2] + EVENTS[3]), EVENTS[2] + EVENTS[3])
    + b"0\r\nx-trailer: yes\r\n\r\n"
)
BODY = b"".join(EVENTS)
LENGTH = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(BODY), BODY)


async def feed_pieces(raw: bytes, cuts: list[int]) -> tuple[int, list[tuple[bytes, int]], bool]:
    """Feed ``raw`` to a connection in pieces cut at ``cuts``, piece i stamped i + 1.

    Returns the status, the (chunk, stamp) pairs the body stream yields, and whether the
    connection went back to the pool (keep-alive)."""
    transport = ArrivalTransport()
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    connection = Connection(transport, (b"http", b"test", 80, None), ours, None)
    try:
        answer = connection.begin(head_only=False)
        bounds = [0, *cuts, len(raw)]
        for stamp, (start, end) in enumerate(itertools.pairwise(bounds), start=1):
            connection._received(raw[start:end], stamp)
        status, _, _, stream = answer.result()
        chunks = []
        async for chunk in stream:
            chunks.append((chunk, stream.last))
        pooled = connection in transport._idle.get(connection.origin, {})
        return status, chunks, pooled
    finally:
        connection.close()
        theirs.close()
        await transport.aclose()


def event_stamps(chunks: list[tuple[bytes, int]]) -> list[tuple[bytes, int]]:
    """(payload, stamp) of each SSE event, stamped as the measurement client does."""
    decoder = SSEDecoder()
    return [(payload, stamp) for chunk, stamp in chunks for payload in decoder.feed(chunk)]


def completing_piece(raw: bytes, cuts: list[int]) -> list[int]:
    """For each event, the stamp of the piece that holds its last byte."""
    ends = [match.end() - 1 for match in re.finditer(rb"\n\n", raw)]
    return [1 + sum(1 for cut in cuts if cut <= end) for end in ends]


@pytest.mark.parametrize("raw", [CHUNKED, LENGTH], ids=["chunked", "content-length"])
def test_every_split_offset_parses_and_stamps_events_by_their_completing_piece(
    run: Callable[[Awaitable[Any]], Any], raw: bytes
) -> None:
    async def check() -> None:
        for cut in range(1, len(raw)):
            status, chunks, pooled = await feed_pieces(raw, [cut])
            assert status == 200
            assert b"".join(chunk for chunk, _ in chunks) == BODY, cut
            events = event_stamps(chunks)
            assert [payload for payload, _ in events] == [e[6:-2] for e in EVENTS]
            assert [stamp for _, stamp in events] == completing_piece(raw, [cut]), cut
            assert pooled, cut  # complete answer: the connection is reusable

    run(check())


def test_one_byte_at_a_time(run: Callable[[Awaitable[Any]], Any]) -> None:
    cuts = list(range(1, len(CHUNKED)))
    status, chunks, _ = run(feed_pieces(CHUNKED, cuts))
    assert status == 200
    assert b"".join(chunk for chunk, _ in chunks) == BODY
    assert [s for _, s in event_stamps(chunks)] == completing_piece(CHUNKED, cuts)


def test_connection_close_header_is_not_pooled(run: Callable[[Awaitable[Any]], Any]) -> None:
    raw = LENGTH.replace(b"\r\n\r\n", b"\r\nconnection: close\r\n\r\n", 1)
    _, chunks, pooled = run(feed_pieces(raw, []))
    assert b"".join(chunk for chunk, _ in chunks) == BODY
    assert not pooled


def test_malformed_response_is_a_protocol_error(run: Callable[[Awaitable[Any]], Any]) -> None:
    with pytest.raises(httpx.RemoteProtocolError) as caught:
        run(feed_pieces(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n", []))
    assert classify_exception(caught.value).error_class is ErrorClass.PROTOCOL


# ------------------------------------------------------------------ scripted server


@pytest.fixture
def serve() -> Iterator[Callable[..., ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def start(
        *scripts: Script, tls: ssl.SSLContext | None = None, failing: bool = False
    ) -> ScriptedServer:
        servers.append(ScriptedServer(*scripts, tls=tls, failing=failing))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)


def client(**options: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=ArrivalTransport(**options))


def test_keep_alive_connection_is_reused(
    run: Callable[[Awaitable[Any]], Any], serve: Callable[..., ScriptedServer]
) -> None:
    seen: list[bytes] = []

    def three(conn: socket.socket) -> None:
        for n in range(3):
            seen.append(read_request(conn))
            conn.sendall(ok(b"answer %d" % n))

    server = serve(three)

    async def go() -> list[str]:
        async with client() as http:
            first = await http.post(server.url("/a?q=1"), content=b"x" * 10)
            second = await http.get(server.url("/b"))
            async with http.stream("GET", server.url("/c")) as third:
                body = await third.aread()
            return [first.text, second.text, body.decode()]

    assert run(go()) == ["answer 0", "answer 1", "answer 2"]
    assert server.accepted == 1
    assert seen[0].startswith(b"POST /a?q=1 HTTP/1.1\r\n")
    assert seen[0].endswith(b"\r\n\r\n" + b"x" * 10)
    assert b"\r\nhost: 127.0.0.1:" in seen[0].lower()


def test_stale_keep_alive_connection_is_replaced_once(
    run: Callable[[Awaitable[Any]], Any], serve: Callable[..., ScriptedServer]
) -> None:
    closed = threading.Event()

    def answer_then_close(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(ok(b"first"))
        conn.shutdown(socket.SHUT_RDWR)  # the server's idle timeout, as the client sends
        closed.set()

    def answer(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(ok(b"second"))

    server = serve(answer_then_close, answer)

    async def go() -> tuple[str, str]:
        async with client() as http:
            first = await http.post(server.url(), content=b"1")
            # Block the loop until the server closed, so the client has not seen the FIN
            # when it reuses the pooled connection.
            assert closed.wait(10)
            second = await http.post(server.url(), content=b"2")
            return first.text, second.text

    assert run(go()) == ("first", "second")
    assert server.accepted == 2


def test_cut_stream_delivers_what_arrived_then_fails_as_protocol(
    run: Callable[[Awaitable[Any]], Any], serve: Callable[..., ScriptedServer]
) -> None:
    def cut(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(STREAM_HEAD + chunk(EVENTS[0]) + chunk(EVENTS[1][:4]))

    server = serve(cut)

    async def go() -> tuple[bytes, BaseException]:
        received = b""
        async with client() as http, http.stream("GET", server.url()) as response:
            try:
                async for piece in response.aiter_raw():
                    received += piece
            except httpx.HTTPError as exc:
                return received, exc
        raise AssertionError("the cut stream ended without an error")

    received, error = run(go())
    assert received == EVENTS[0] + EVENTS[1][:4]
    assert isinstance(error, httpx.RemoteProtocolError)
    assert classify_exception(error).error_class is ErrorClass.PROTOCOL


def test_body_delimited_by_close_ends_normally(
    run: Callable[[Awaitable[Any]], Any], serve: Callable[..., ScriptedServer]
) -> None:
    def until_close(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n" + BODY)

    server = serve(until_close)

    async def go() -> bytes:
        async with client() as http:
            return (await http.get(server.url())).content

    assert run(go()) == BODY


def test_head_and_no_content_answers(
    run: Callable[[Awaitable[Any]], Any], serve: Callable[..., ScriptedServer]
) -> None:
    def head(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 1234\r\n\r\n")

    def no_content(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n")
        read_request(conn)  # still usable
        conn.sendall(ok())

    server = serve(head, no_content)

    async def go() -> list[tuple[int, bytes]]:
        async with client() as http:
            answers = [await http.head(server.url()), await http.delete(server.url())]
            answers.append(await http.get(server.url()))
            return [(answer.status_code, answer.content) for answer in answers]

    assert run(go()) == [(200, b""), (204, b""), (200, b"hello")]
    assert server.accepted == 2  # HEAD's connection is not reused


def test_streamed_request_body_is_sent_chunked(
    run: Callable[[Awaitable[Any]], Any], serve: Callable[..., ScriptedServer]
) -> None:
    seen: list[bytes] = []

    def echo(conn: socket.socket) -> None:
        seen.append(read_request(conn))
        conn.sendall(ok())

    server = serve(echo)

    async def body() -> AsyncIterator[bytes]:
        yield b"abc"
        yield b""
        yield b"defg"

    async def go() -> int:
        async with client() as http:
            return (await http.post(server.url(), content=body())).status_code

    assert run(go()) == 200
    assert seen[0].endswith(b"\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n")


def test_connection_refused_is_a_connect_error(run: Callable[[Awaitable[Any]], Any]) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    async def go() -> None:
        async with client() as http:
            await http.get(f"http://127.0.0.1:{port}/")

    with pytest.raises(httpx.ConnectError) as caught:
        run(go())
    assert classify_exception(caught.value).error_class is ErrorClass.CONNECT


def test_silent_server_is_a_read_timeout(
    run: Callable[[Awaitable[Any]], Any], serve: Callable[..., ScriptedServer]
) -> None:
    released = threading.Event()

    def silent_after_head(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(STREAM_HEAD + chunk(EVENTS[0]))
        released.wait(10)

    server = serve(silent_after_head)

    async def go() -> BaseException:
        timeout = httpx.Timeout(5.0, read=0.2)
        try:
            async with client() as http, http.stream("GET", server.url(), timeout=timeout) as r:
                async for _ in r.aiter_raw():
                    pass
        except httpx.HTTPError as exc:
            return exc
        finally:
            released.set()
        raise AssertionError("no timeout")

    error = run(go())
    assert isinstance(error, httpx.ReadTimeout)
    assert classify_exception(error).error_class is ErrorClass.TIMEOUT


@linux_only
@pytest.mark.serial  # stamps within 1 ms: nothing may run beside it
def test_stamps_are_kernel_arrival_not_read_time(
    run: Callable[[Awaitable[Any]], Any], serve: Callable[..., ScriptedServer]
) -> None:
    go_on, written, finish = threading.Event(), threading.Event(), threading.Event()
    sent_at: list[int] = []

    def stream(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(STREAM_HEAD + chunk(EVENTS[0]))
        go_on.wait(10)
        conn.sendall(chunk(EVENTS[1]))
        sent_at.append(time.perf_counter_ns())
        written.set()
        finish.wait(10)
        conn.sendall(chunk(EVENTS[2]) + b"0\r\n\r\n")

    server = serve(stream)

    async def go() -> tuple[int, int]:
        async with client() as http, http.stream("GET", server.url()) as response:
            arrival = arrival_of(response)
            assert isinstance(arrival, ArrivalStream)
            pieces = response.aiter_raw()
            assert await anext(pieces) == EVENTS[0]
            go_on.set()
            assert written.wait(10)
            # The loop is busy elsewhere while EVENTS[1] waits in the kernel.
            time.sleep(0.2)  # noqa: ASYNC251 - blocking the loop is the point
            read_at = time.perf_counter_ns()
            assert await anext(pieces) == EVENTS[1]
            stamp = arrival.last
            finish.set()
            async for _ in pieces:
                pass
            return stamp, read_at

    stamp, read_at = run(go())
    # Stamped when the kernel received it (before the server's send returned), not when
    # the busy loop got to it 0.2 s later; 1 ms allows for converting between clocks.
    assert stamp <= sent_at[0] + 1_000_000
    assert read_at - stamp >= 150_000_000


def wait_until(condition: Callable[[], bool]) -> None:
    """Block the calling thread (and so the event loop) until ``condition`` holds, then
    20 ms more so the bytes just written are queued in the client's socket."""
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.001)
    time.sleep(0.02)


@linux_only
@pytest.mark.serial  # stamps within 1 ms: nothing may run beside it
def test_sweep_reads_during_busy_work_so_writes_keep_their_own_stamps(
    run: Callable[[Awaitable[Any]], Any], serve: Callable[..., ScriptedServer]
) -> None:
    step = [threading.Event() for _ in range(3)]
    sent_at: list[int] = []

    def stream(conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(STREAM_HEAD)
        for event, proceed in zip(EVENTS[:2], step, strict=False):
            proceed.wait(10)
            conn.sendall(chunk(event))
            sent_at.append(time.perf_counter_ns())
        step[2].wait(10)
        conn.sendall(b"0\r\n\r\n")

    server = serve(stream)

    async def go() -> list[tuple[bytes, int]]:
        transport = ArrivalTransport()
        async with (
            httpx.AsyncClient(transport=transport) as http,
            http.stream("GET", server.url()) as response,
        ):
            arrival = arrival_of(response)
            assert arrival is not None
            # The loop does not run from here until the second write has landed: only
            # the sweep reads the first one in between, as it does inside busy code.
            step[0].set()
            wait_until(lambda: len(sent_at) >= 1)
            transport.sweep(force=True)
            step[1].set()
            wait_until(lambda: len(sent_at) >= 2)
            step[2].set()
            out = []
            async for piece in response.aiter_raw():
                out.append((piece, arrival.last))
            return out

    out = run(go())
    assert [piece for piece, _ in out] == EVENTS[:2]  # two reads, not one merged read
    assert out[0][1] <= sent_at[0] + 1_000_000 < sent_at[1] <= out[1][1] + 1_000_000


# ------------------------------------------------------------------ TLS


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed(tmp_path_factory.mktemp("tls"), "localhost")


def test_tls_stream_with_a_verified_certificate(
    run: Callable[[Awaitable[Any]], Any],
    serve: Callable[..., ScriptedServer],
    certificate: tuple[Path, Path],
) -> None:
    cert, key = certificate
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)

    def stream(conn: socket.socket) -> None:
        for _ in range(2):
            read_request(conn)
            conn.sendall(STREAM_HEAD)
            for event in EVENTS:
                conn.sendall(chunk(event))
            conn.sendall(b"0\r\n\r\n")

    server = serve(stream, tls=server_context)
    trusted = ssl.create_default_context(cafile=str(cert))

    async def go() -> list[bytes]:
        bodies = []
        async with client(verify=trusted) as http:
            for _ in range(2):
                async with http.stream("GET", server.url()) as response:
                    assert arrival_of(response) is not None
                    bodies.append(b"".join([piece async for piece in response.aiter_raw()]))
        return bodies

    assert run(go()) == [BODY, BODY]
    assert server.accepted == 1


def test_tls_with_an_untrusted_certificate_is_a_connect_error(
    run: Callable[[Awaitable[Any]], Any],
    serve: Callable[..., ScriptedServer],
    certificate: tuple[Path, Path],
) -> None:
    cert, key = certificate
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    server = serve(lambda conn: None, tls=server_context, failing=True)

    async def go() -> None:
        async with client() as http:  # the system's trust store: self-signed is refused
            await http.get(server.url())

    with pytest.raises(httpx.ConnectError) as caught:
        run(go())
    assert classify_exception(caught.value).error_class is ErrorClass.CONNECT
