"""The capture hand-off's primary side: frames wait and leave together, in order, within
the buffer bound; a stats query and a full batch flush at once."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from workers.gateway.handoff import FLUSH_BYTES, FrameReader, Handoff, frame

T = TypeVar("T")


class Socket:
    """A transport that keeps each write; ``buffered`` is its pretended write buffer."""

    def __init__(self, buffered: int = 0) -> None:
        self.writes: list[bytes] = []
        self.buffered = buffered

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def writelines(self, pieces: list[bytes]) -> None:
        self.write(b"".join(pieces))

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def close(self) -> None:
        pass


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def connected(max_bytes: int = 1 << 20, flush_s: float = 0.05) -> tuple[Handoff, Socket]:
    handoff = Handoff(max_bytes, flush_s)
    socket = Socket()
    handoff.connection_made(socket)  # type: ignore[arg-type]
    return handoff, socket


def messages(socket: Socket) -> list[tuple[Any, ...]]:
    return FrameReader().feed(b"".join(socket.writes))


def test_frames_wait_for_the_flush_and_leave_in_one_write_in_order() -> None:
    async def go() -> tuple[int, Socket]:
        handoff, socket = connected(flush_s=0.05)
        assert handoff.begin("a", 0, 10, b"{}", None)
        assert handoff.begin("b", 1, 11, b"{}", "user-1")
        handoff.end(("end", "a", 12, 200, [], [(13, b"x")], 14, None, True))
        before = len(socket.writes)
        await asyncio.sleep(0.2)
        return before, socket

    before, socket = run(go())
    assert before == 0
    assert len(socket.writes) == 1
    assert [m[:2] for m in messages(socket)] == [("begin", "a"), ("begin", "b"), ("end", "a")]
    assert messages(socket)[1][-1] == "user-1"


def test_waiting_frames_count_against_the_bound_and_drops_are_counted() -> None:
    async def go() -> Handoff:
        size = len(frame(("begin", "k", 0, 0, b"x" * 100, None)))
        handoff, socket = connected(max_bytes=2 * size + size // 2)
        for key in "abc":  # the third would pass the bound: dropped, not queued
            handoff.begin(key, 0, 0, b"x" * 100, None)
        assert handoff.snapshot()["buffered_bytes"] == 2 * size
        handoff.flush()
        socket.buffered = 2 * size  # still in the socket's buffer: the bound holds
        assert not handoff.begin("d", 0, 0, b"x" * 100, None)
        return handoff

    handoff = run(go())
    assert handoff.stats.requests_handed == 2
    assert handoff.stats.requests_dropped == 2


def test_a_batch_of_flush_bytes_leaves_at_once() -> None:
    async def go() -> Socket:
        handoff, socket = connected(max_bytes=8 * FLUSH_BYTES, flush_s=60)
        handoff.begin("big", 0, 0, b"x" * FLUSH_BYTES, None)
        return socket

    assert len(run(go()).writes) == 1


def test_a_stats_query_follows_every_frame_sent_before_it() -> None:
    async def go() -> Socket:
        handoff, socket = connected(flush_s=60)
        handoff.begin("a", 0, 0, b"{}", None)
        await handoff.query(timeout_s=0.01)  # nobody answers here: {} after the timeout
        return socket

    assert [m[0] for m in messages(run(go()))] == ["begin", "stats"]
