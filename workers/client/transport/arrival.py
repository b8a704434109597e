"""Response bytes with the time they arrived: the stamp carried beside each chunk.

The kernel's receive time of each read (``SO_TIMESTAMPNS`` on Linux, the read time
elsewhere) is converted to the ``perf_counter_ns`` clock of every other stamp and kept
with the bytes in an :class:`ArrivalStream`, the response body that
the transport (``pool.py``) hands to httpx; ``arrival_of(response).last`` is the
stamp of the chunk just read (docs/load.md, decision 22). ``READ_GAPS`` records when the
client went without reading its sockets, for the ``client-bound`` rule (docs/load.md).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable
from time import perf_counter_ns, time_ns
from typing import Protocol

import httpx

ARRIVAL_EXTENSION = "tokenbench.arrival"

# Past this many unread bytes a response stops reading its socket until the reader
# catches up, so a slow reader (a gateway relaying to a slow client) cannot fill memory.
# An LLM stream never gets near it; while paused, arrival stamps are late by design.
_HIGH_WATER = 4 * 1024 * 1024
_LOW_WATER = 1024 * 1024
NO_BODY_STATUS = (204, 304)
READ_SIZE = 64 * 1024

# SO_TIMESTAMPNS (asm-generic/socket.h; Python's socket module does not name it): each
# recvmsg() carries the CLOCK_REALTIME at which the kernel received the last bytes read.
SO_TIMESTAMPNS = 35 if sys.platform == "linux" else None
_TIMESPEC = struct.Struct("@qq")
ANCILLARY_SIZE = socket.CMSG_SPACE(_TIMESPEC.size) if SO_TIMESTAMPNS else 0
# A kernel stamp older than this (or in the future) means the wall clock was stepped
# between receive and read: the read time is used instead.
_MAX_AGE_NS = 60 * 1_000_000_000


class BodySource(Protocol):
    """The connection a body arrives on, as the body sees it: the reader pauses its
    reads past the high-water mark and resumes them, or abandons it."""

    @property
    def paused(self) -> bool:
        """Whether the connection stopped reading its socket."""
        ...

    def pause(self) -> None:
        """Stop reading the socket until ``resume``."""
        ...

    def resume(self) -> None:
        """Read the socket again."""
        ...

    def abandon(self) -> None:
        """Give up the body: the connection cannot be reused."""
        ...


# The shortest stretch without a read that counts as a gap: merges in shorter ones err by
# less than the client's stated accuracy (docs/load.md, "The measurement client").
READ_GAP_MIN_NS = 5_000_000


class GapSink(Protocol):
    """Where a gap goes (``workers/shard/spans.py``)."""

    def add(self, start: int, end: int, /) -> None:
        """The client did not look at its sockets from ``start`` to ``end``."""


class ReadGaps:
    """The stretches in which this process's client did not look at its sockets.

    Every read of a socket (the loop reporting it readable, or a sweep) and every sweep
    is a look; a stretch of at least ``min_ns`` without one is a gap, handed to every
    sink registered meanwhile (``workers/shard/health.py`` registers one per shard). Bytes that
    arrive in a gap wait unread, and the kernel merges a stream's writes that land
    there under the later stamp: how a late read still distorts kernel-stamped figures.
    An idle loop makes gaps too, but nothing arrives in them (it would have been read).
    """

    __slots__ = ("last", "min_ns", "sinks")

    def __init__(self, min_ns: int = READ_GAP_MIN_NS) -> None:
        self.min_ns = min_ns
        self.last = perf_counter_ns()
        self.sinks: list[GapSink] = []

    def looked(self, now: int) -> None:
        """The client looked at its sockets at ``now`` (perf_counter_ns)."""
        if now - self.last >= self.min_ns:
            for sink in self.sinks:
                sink.add(self.last, now)
        self.last = now


READ_GAPS = ReadGaps()


def kernel_arrival(ancillary: list[tuple[int, int, bytes]]) -> int:
    """``perf_counter_ns`` of the kernel's receive time in ``ancillary``, else of now."""
    now = perf_counter_ns()
    for level, kind, payload in ancillary:
        if kind == SO_TIMESTAMPNS and level == socket.SOL_SOCKET:
            seconds, nanos = _TIMESPEC.unpack(payload[: _TIMESPEC.size])
            age: int = time_ns() - (seconds * 1_000_000_000 + nanos)
            if 0 <= age < _MAX_AGE_NS:
                return now - age
    return now


class ArrivalStream(httpx.AsyncByteStream):
    """A response body as httpx byte chunks, each with the ``perf_counter_ns`` arrival
    stamp of the socket read that delivered it.

    While iterating, ``last`` is the arrival stamp of the chunk just yielded (httpx's
    ``aiter_raw()`` passes chunks through one for one); ``end`` is the arrival of the
    bytes that completed the body. Bytes of one read are joined into one chunk; bytes of
    different reads never are.
    """

    __slots__ = ("_buffered", "_chunks", "_consume", "_done", "_error", "_owner", "_stamps",
                 "_sweep", "_waiter", "end", "last")  # fmt: skip

    def __init__(self, owner: BodySource, sweep: Callable[[], None]) -> None:
        self._chunks: deque[bytes] = deque()
        self._stamps: deque[int] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._done = False
        self._error: BaseException | None = None
        self._buffered = 0
        self._owner: BodySource | None = owner  # while the body is still arriving
        self._sweep = sweep  # reads every waiting socket (ArrivalTransport.sweep)
        # The reader of read_into(), while it waits: bytes go to it as they are read.
        self._consume: Callable[[bytes, int], None] | None = None
        self.last = 0
        self.end: int | None = None

    # -- producer side (the connection, as bytes are read) --

    def push(self, data: bytes, stamp: int) -> None:
        consume = self._consume
        if consume is not None:
            # Called from the connection's read callback: a reader's failure (a
            # malformed event, an error the stream reports) must not escape into the
            # transport; it ends the body and is raised to the reader (_reader_failed).
            self.last = stamp
            try:
                consume(data, stamp)
            except BaseException as exc:  # handed to the reader, not lost
                self._reader_failed(exc)
            return
        if self._stamps and self._stamps[-1] == stamp:
            self._chunks[-1] += data  # same arrival: one chunk, one reader wake-up
        else:
            self._chunks.append(data)
            self._stamps.append(stamp)
        self._buffered += len(data)
        if self._buffered > _HIGH_WATER and self._owner is not None:
            self._owner.pause()
        self._wake()

    def finish(self, stamp: int) -> None:
        self.end = stamp
        self._done = True
        self._owner = None
        self._wake()

    def fail(self, error: BaseException) -> None:
        # Bytes that arrived before the failure are still delivered, then the error.
        self._error = error
        self._done = True
        self._owner = None
        self._wake()

    def _reader_failed(self, error: BaseException) -> None:
        self._consume = None
        self._error = error
        self._done = True
        owner, self._owner = self._owner, None
        if owner is not None:
            owner.abandon()  # the rest of the body is never read: not reusable
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- consumer side (httpx) --

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks, stamps, sweep = self._chunks, self._stamps, self._sweep
        while True:
            sweep()
            if chunks:
                chunk = chunks.popleft()
                self.last = stamps.popleft()
                self._buffered -= len(chunk)
                owner = self._owner
                if owner is not None and owner.paused and self._buffered < _LOW_WATER:
                    owner.resume()
                yield chunk
            elif self._error is not None:
                raise self._error
            elif self._done:
                return
            else:
                self._waiter = asyncio.get_running_loop().create_future()
                try:
                    await self._waiter
                finally:
                    self._waiter = None

    async def read_into(self, consume: Callable[[bytes, int], None]) -> None:
        """Hand each chunk and its arrival stamp to ``consume`` until the body ends.

        The direct path of ``workers/client/streaming.py``. Chunks that arrived before
        the call are handed over first; after them ``consume`` is called from the
        connection's read callback itself, as each read's bytes are parsed, and this
        coroutine wakes once, when the body ends: per token event no buffering, no
        future and no task step, which was half of a stream's CPU per event (docs/load.md,
        "CPU per token event"). The stamps are the same: taken before the bytes are
        parsed. An exception ``consume`` raises ends the body (its connection is not
        reused) and is raised here."""
        chunks, stamps = self._chunks, self._stamps
        self._sweep()
        while chunks:
            chunk = chunks.popleft()
            stamp = self.last = stamps.popleft()
            self._buffered -= len(chunk)
            consume(chunk, stamp)
        owner = self._owner
        if owner is not None and owner.paused:
            owner.resume()  # nothing is buffered from here on
        if not self._done:
            self._consume = consume
            try:
                while not self._done:
                    self._waiter = asyncio.get_running_loop().create_future()
                    try:
                        await self._waiter
                    finally:
                        self._waiter = None
            finally:
                self._consume = None
        if self._error is not None:
            raise self._error

    async def aclose(self) -> None:
        """Stop reading; a body not yet complete costs its connection (it can't be reused)."""
        owner, self._owner = self._owner, None
        self._chunks.clear()
        self._stamps.clear()
        if not self._done:
            self._done = True
            if owner is not None:
                owner.abandon()


def arrival_of(response: httpx.Response) -> ArrivalStream | None:
    """The arrival stamps of ``response``'s body, when an ArrivalTransport received it."""
    stream = response.extensions.get(ARRIVAL_EXTENSION)
    return stream if isinstance(stream, ArrivalStream) else None
