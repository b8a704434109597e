"""Response bytes with their arrival stamps: chunks keep the stamp of the read that
brought them, a slow reader pauses the socket, failures come after the bytes."""

from __future__ import annotations

import asyncio
import socket
import struct
from time import perf_counter_ns, time_ns

import httpx
import pytest

from workers.client.transport.arrival import (
    _HIGH_WATER,
    _LOW_WATER,
    ARRIVAL_EXTENSION,
    SO_TIMESTAMPNS,
    ArrivalStream,
    arrival_of,
    kernel_arrival,
)

SECOND = 1_000_000_000


class Source:
    """The connection side of a body, as a record of what the body asked of it."""

    def __init__(self) -> None:
        self.paused = False
        self.pauses = 0
        self.resumes = 0
        self.abandoned = False

    def pause(self) -> None:
        self.paused = True
        self.pauses += 1

    def resume(self) -> None:
        self.paused = False
        self.resumes += 1

    def abandon(self) -> None:
        self.abandoned = True


def read_all(stream: ArrivalStream) -> list[tuple[bytes, int]]:
    async def go() -> list[tuple[bytes, int]]:
        return [(chunk, stream.last) async for chunk in stream]

    return asyncio.run(go())


def test_bytes_of_one_read_are_one_chunk_with_that_reads_stamp() -> None:
    sweeps: list[int] = []
    stream = ArrivalStream(Source(), lambda: sweeps.append(1))
    stream.push(b"data: a", 100)
    stream.push(b"\n\n", 100)  # the same read (same stamp): joined
    stream.push(b"data: b\n\n", 250)
    stream.finish(300)
    assert read_all(stream) == [(b"data: a\n\n", 100), (b"data: b\n\n", 250)]
    assert stream.end == 300
    assert sweeps  # the reader lets the transport read other sockets as it goes


def test_a_reader_that_waits_gets_bytes_pushed_later() -> None:
    stream = ArrivalStream(Source(), lambda: None)

    async def go() -> list[tuple[bytes, int]]:
        async def produce() -> None:
            for i in range(3):
                await asyncio.sleep(0)
                stream.push(b"x%d" % i, 10 + i)
            stream.finish(20)

        producer = asyncio.create_task(produce())
        got = [(chunk, stream.last) async for chunk in stream]
        await producer
        return got

    assert asyncio.run(go()) == [(b"x0", 10), (b"x1", 11), (b"x2", 12)]


def test_unread_bytes_past_the_high_water_mark_pause_the_socket_until_drained() -> None:
    source = Source()
    stream = ArrivalStream(source, lambda: None)
    piece = b"x" * (256 * 1024)
    pushed = 0
    while not source.paused:
        stream.push(piece, pushed)  # distinct stamps: one chunk each
        pushed += 1
    assert pushed * len(piece) > _HIGH_WATER and source.pauses == 1

    async def read_until_resumed() -> int:
        chunks = aiter(stream)
        read = 0
        while not source.resumes:
            read += len(await anext(chunks))
        stream.finish(pushed)
        async for chunk in chunks:
            read += len(chunk)
        return read

    total = pushed * len(piece)
    assert asyncio.run(read_until_resumed()) == total
    assert source.resumes == 1 and not source.paused


def test_a_paused_socket_resumes_only_under_the_low_water_mark() -> None:
    source = Source()
    stream = ArrivalStream(source, lambda: None)
    piece = b"x" * (256 * 1024)
    pushed = 0
    while not source.paused:
        stream.push(piece, pushed)
        pushed += 1

    async def unread_at_resume() -> int:
        chunks = aiter(stream)
        read = 0
        while not source.resumes:
            read += len(await anext(chunks))
        return pushed * len(piece) - read

    unread = asyncio.run(unread_at_resume())
    assert unread < _LOW_WATER <= unread + len(piece)  # the first read that got under it


def test_a_failure_is_raised_after_the_bytes_that_arrived_before_it() -> None:
    stream = ArrivalStream(Source(), lambda: None)
    stream.push(b"partial", 5)
    stream.fail(httpx.RemoteProtocolError("peer closed"))
    got: list[bytes] = []

    async def go() -> None:
        async for chunk in stream:
            got.append(chunk)

    with pytest.raises(httpx.RemoteProtocolError):
        asyncio.run(go())
    assert got == [b"partial"]


def test_closing_an_unfinished_body_abandons_its_connection_but_not_a_finished_one() -> None:
    unfinished, finished = Source(), Source()
    body = ArrivalStream(unfinished, lambda: None)
    body.push(b"x", 1)
    asyncio.run(body.aclose())
    assert unfinished.abandoned
    assert read_all(body) == []  # nothing more is delivered
    done = ArrivalStream(finished, lambda: None)
    done.push(b"x", 1)
    done.finish(2)
    asyncio.run(done.aclose())
    assert not finished.abandoned


def _timestamp(ns: int) -> list[tuple[int, int, bytes]]:
    assert SO_TIMESTAMPNS is not None
    return [(socket.SOL_SOCKET, SO_TIMESTAMPNS, struct.pack("@qq", ns // SECOND, ns % SECOND))]


@pytest.mark.skipif(SO_TIMESTAMPNS is None, reason="kernel receive stamps are Linux only")
def test_kernel_stamp_is_moved_onto_the_perf_counter_clock() -> None:
    before = perf_counter_ns()
    stamp = kernel_arrival(_timestamp(time_ns() - SECOND))  # received a second ago
    after = perf_counter_ns()
    # At least a second before the call returned (the age only grows while it runs), and
    # not absurdly earlier: the wide lower margin tolerates a stalled, loaded machine.
    assert before - 30 * SECOND < stamp <= after - SECOND


@pytest.mark.skipif(SO_TIMESTAMPNS is None, reason="kernel receive stamps are Linux only")
@pytest.mark.parametrize("offset_s", [120, -5])
def test_a_stamp_from_a_stepped_wall_clock_is_replaced_by_the_read_time(offset_s: int) -> None:
    before = perf_counter_ns()
    stamp = kernel_arrival(_timestamp(time_ns() - offset_s * SECOND))
    assert before <= stamp <= perf_counter_ns()


def test_without_ancillary_data_the_stamp_is_the_read_time() -> None:
    before = perf_counter_ns()
    assert before <= kernel_arrival([]) <= perf_counter_ns()


def test_arrival_of_a_response() -> None:
    stream = ArrivalStream(Source(), lambda: None)
    assert arrival_of(httpx.Response(200, extensions={ARRIVAL_EXTENSION: stream})) is stream
    assert arrival_of(httpx.Response(200)) is None


def test_read_into_hands_buffered_chunks_first_then_each_read_as_it_is_pushed() -> None:
    stream = ArrivalStream(Source(), lambda: None)
    stream.push(b"early", 5)  # arrived with the head, before the reader came
    got: list[tuple[bytes, int]] = []
    during_push: list[int] = []

    def consume(chunk: bytes, stamp: int) -> None:
        got.append((chunk, stamp))

    async def go() -> None:
        reader = asyncio.create_task(stream.read_into(consume))
        await asyncio.sleep(0)  # the reader drained the buffer and waits
        assert got == [(b"early", 5)]
        stream.push(b"a", 10)
        during_push.append(len(got))  # handed over inside push: no task step needed
        stream.push(b"b", 10)  # the same read, parsed in two pieces: two calls
        stream.finish(12)
        await reader

    asyncio.run(go())
    assert during_push == [2]
    assert got == [(b"early", 5), (b"a", 10), (b"b", 10)]
    assert stream.last == 10 and stream.end == 12


def test_a_readers_failure_during_a_push_ends_the_body_and_is_raised_to_it() -> None:
    source = Source()
    stream = ArrivalStream(source, lambda: None)

    def consume(chunk: bytes, stamp: int) -> None:
        if chunk == b"bad":
            raise ValueError("malformed event")

    async def go() -> None:
        reader = asyncio.create_task(stream.read_into(consume))
        await asyncio.sleep(0)
        stream.push(b"good", 1)
        stream.push(b"bad", 2)  # must not raise into the connection's read callback
        stream.push(b"late", 3)  # after the failure: dropped, not handed over
        await reader

    with pytest.raises(ValueError, match="malformed event"):
        asyncio.run(go())
    assert source.abandoned  # the rest of the body is never read: not reused


def test_a_connection_failure_reaches_a_waiting_reader_after_its_bytes() -> None:
    stream = ArrivalStream(Source(), lambda: None)
    got: list[bytes] = []

    async def go() -> None:
        reader = asyncio.create_task(stream.read_into(lambda chunk, _: got.append(chunk)))
        await asyncio.sleep(0)
        stream.push(b"partial", 1)
        stream.fail(httpx.RemoteProtocolError("peer closed"))
        await reader

    with pytest.raises(httpx.RemoteProtocolError):
        asyncio.run(go())
    assert got == [b"partial"]
