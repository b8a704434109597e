"""The primary path's side of the capture hand-off: frames over a Unix socket, bounded.

The gateway's request path only *describes* each request to the capture process
(``workers/gateway/capture.py``): a ``begin`` frame when the request has been read (its
key, sequence number, arrival stamp and raw body) and an ``end`` frame when the answer
is over (stamps and bytes of the answer as they arrived). Everything that costs CPU -
parsing the stream into TTFT/ITL, the sampling hash, the shadow task, the Arrow record,
publishing to Redis - happens in that other process, on another core.

Frames are ``marshal`` dumps of tuples of plain values, length-prefixed: both ends are
this code base on the same interpreter, and marshal is the cheapest encoder for bytes
and ints that cannot execute anything on load.

Frames wait up to ``FLUSH_S`` (0.5 s, or until ``FLUSH_BYTES`` wait) and leave together
in one write. A write per frame woke the capture process twice per request to do one
request's work with cold caches; woken twice a second, it works through a batch, and
its sender thread publishes one shadow message per region per batch: its CPU per
request fell by more than half at 76 requests/s (docs/benchmarks.md, "Gateway CPU").
Nothing measured is late by it - stamps are taken on the primary path, samples are
replayed at their arrival offsets (``workers/gateway/sender.py``) - only when things
happen: a sample's shadow sends start up to 0.5 s later and records reach Redis up to
0.5 s later (the sink publishes every 0.5 s as well); a ``stats`` query or ``close``
flushes first.

The buffer - frames waiting plus the socket transport's own write buffer - is bounded
at ``max_bytes``: when the capture process falls behind (or died), frames that would
pass the bound are dropped and counted, so the primary path never waits for it. A
dropped ``begin`` drops its ``end`` as well (one count per request).

The socket also carries the capture process's answers: its counters for
``/gateway/stats`` (a ``stats`` query is answered after every frame sent before it, so
the counters include every request the gateway finished before the query) and
``closed`` when it has flushed everything at shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import marshal
import struct
from dataclasses import dataclass
from typing import Any, cast

HEADER = struct.Struct("!I")
MAX_BUFFER_BYTES = 64 * 1024 * 1024
FLUSH_S = 0.5
FLUSH_BYTES = 1024 * 1024
# marshal's format version 4 is the newest every supported Python reads and writes.
MARSHAL_VERSION = 4


def frame(message: tuple[Any, ...]) -> bytes:
    """One length-prefixed frame of ``message``."""
    payload = marshal.dumps(message, MARSHAL_VERSION)
    return HEADER.pack(len(payload)) + payload


class FrameReader:
    """Splits a byte stream into the messages of its frames."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[Any, ...]]:
        """The messages completed by ``data``."""
        buffer = self._buffer
        buffer += data
        out: list[tuple[Any, ...]] = []
        start, size = 0, len(buffer)
        while size - start >= HEADER.size:
            (length,) = HEADER.unpack_from(buffer, start)
            end = start + HEADER.size + length
            if end > size:
                break
            # Frames come from this code base in our own process pair, never the network.
            out.append(marshal.loads(bytes(buffer[start + HEADER.size : end])))  # noqa: S302
            start = end
        if start:
            del buffer[:start]
        return out


@dataclass
class HandoffStats:
    """Counters of the hand-off (the primary's event loop only)."""

    requests_handed: int = 0
    requests_dropped: int = 0
    bytes_handed: int = 0
    buffered_bytes: int = 0
    max_buffer_bytes: int = MAX_BUFFER_BYTES
    connected: bool = False


class Handoff(asyncio.Protocol):
    """The primary's end of the capture socket."""

    def __init__(self, max_bytes: int = MAX_BUFFER_BYTES, flush_s: float = FLUSH_S) -> None:
        self.stats = HandoffStats(max_buffer_bytes=max_bytes)
        self.max_bytes = max_bytes
        self.flush_s = flush_s
        self.transport: asyncio.WriteTransport | None = None
        self._frames: list[bytes] = []  # waiting for the next flush
        self._frame_bytes = 0
        self._flushing: asyncio.TimerHandle | None = None
        self._reader = FrameReader()
        self._queries = itertools.count()
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    # ------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the transport; the socket is ready."""
        # uvloop's transports are not registered as asyncio's classes (no isinstance).
        self.transport = cast(asyncio.WriteTransport, transport)
        self.stats.connected = True

    def data_received(self, data: bytes) -> None:
        """Answers of the capture process."""
        for message in self._reader.feed(data):
            if message[0] == "stats":
                waiting = self._waiting.pop(message[1], None)
                if waiting is not None and not waiting.done():
                    waiting.set_result(message[2])
            elif message[0] == "closed" and not self.closed.done():
                self.closed.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        """The capture process is gone: every later frame is a counted drop."""
        self.transport = None
        self._frames.clear()
        self._frame_bytes = 0
        self.stats.connected = False
        if not self.closed.done():
            self.closed.set_result(None)
        for waiting in self._waiting.values():
            if not waiting.done():
                waiting.set_result({})
        self._waiting.clear()

    # ------------------------------------------------------------ sending

    def send(self, message: tuple[Any, ...]) -> bool:
        """Queue ``message`` unless the buffer is full or the process gone (no waiting)."""
        transport = self.transport
        if transport is None:
            return False
        data = frame(message)
        size = len(data)
        if transport.get_write_buffer_size() + self._frame_bytes + size > self.max_bytes:
            return False
        self._frames.append(data)
        self._frame_bytes += size
        self.stats.bytes_handed += size
        if self._frame_bytes >= FLUSH_BYTES:
            self.flush()
        elif self._flushing is None:
            self._flushing = asyncio.get_running_loop().call_later(self.flush_s, self.flush)
        return True

    def flush(self) -> None:
        """Write the waiting frames, in order, in one write."""
        if self._flushing is not None:
            self._flushing.cancel()
            self._flushing = None
        frames = self._frames
        if not frames:
            return
        if self.transport is not None:
            self.transport.writelines(frames)
        frames.clear()
        self._frame_bytes = 0

    def begin(
        self, key: str, seq: int, received: int, body: bytes, sample_value: str | None
    ) -> bool:
        """Describe a request that has been read; False when dropped (counted)."""
        if self.send(("begin", key, seq, received, body, sample_value)):
            self.stats.requests_handed += 1
            return True
        self.stats.requests_dropped += 1
        return False

    def end(self, message: tuple[Any, ...]) -> None:
        """Describe how a handed request's answer went (``("end", key, ...)``)."""
        if not self.send(message):
            self.stats.requests_dropped += 1

    async def query(self, timeout_s: float = 10.0) -> dict[str, Any]:
        """The capture process's counters after every frame sent so far ({} if none)."""
        number = next(self._queries)
        waiting: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[number] = waiting
        # A query is not a capture: it may pass the bound (a few bytes), never dropped.
        if self.transport is None:
            self._waiting.pop(number, None)
            return {}
        self.flush()  # after every frame sent before it
        self.transport.write(frame(("stats", number)))
        try:
            return await asyncio.wait_for(waiting, timeout_s)
        except TimeoutError:
            return {}
        finally:
            self._waiting.pop(number, None)

    async def close(self, timeout_s: float) -> None:
        """Ask the capture process to flush and stop; wait up to ``timeout_s`` for it."""
        if self.transport is not None:
            self.flush()
            self.transport.write(frame(("close",)))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.closed), timeout_s)
        if self.transport is not None:
            self.transport.close()

    def snapshot(self) -> dict[str, Any]:
        """The hand-off counters as JSON values."""
        transport = self.transport
        waiting = 0 if transport is None else transport.get_write_buffer_size()
        self.stats.buffered_bytes = waiting + self._frame_bytes
        return {
            "requests_handed": self.stats.requests_handed,
            "requests_dropped": self.stats.requests_dropped,
            "bytes_handed": self.stats.bytes_handed,
            "buffered_bytes": self.stats.buffered_bytes,
            "max_buffer_bytes": self.stats.max_buffer_bytes,
            "connected": self.stats.connected,
        }
