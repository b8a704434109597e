"""Connections to the primary: a keep-alive pool per origin, HTTP/1.1 parsed by httptools.

The primary path forwards raw bytes: an :class:`UpstreamConnection` writes a request
that the gateway composed in one piece and hands every piece of the answer to its
current :class:`Receiver` as ``data_received`` gets it, stamped with
``perf_counter_ns`` before anything decodes it (docs/metrics.md). Nothing is buffered
and no coroutine runs per chunk. A connection goes back to its pool when the answer
ended cleanly and both sides allow keep-alive; any other ending closes it.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from dataclasses import dataclass
from typing import Protocol, cast
from urllib.parse import urlsplit

import httptools

now = time.perf_counter_ns


class Receiver(Protocol):
    """What one exchange does with its answer."""

    def on_head(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        """The answer's status line and headers arrived."""

    def on_body(self, chunk: bytes, stamp: int) -> None:
        """A piece of the (de-chunked) body arrived at ``stamp``."""

    def on_end(self) -> None:
        """The answer is complete (the receiver writes what it holds)."""

    def flush(self) -> None:
        """One read of the primary was handed over: write what it produced."""

    def on_lost(self, reason: str, got_head: bool) -> None:
        """The connection ended before the answer did."""


@dataclass(frozen=True, slots=True)
class Origin:
    """Where the primary is: scheme, host, port and the path prefix of its API."""

    host: str
    port: int
    tls: bool
    prefix: str

    @classmethod
    def of(cls, base_url: str) -> Origin:
        """The origin of ``base_url`` (``http(s)://host[:port]/prefix``)."""
        parts = urlsplit(base_url)
        tls = parts.scheme == "https"
        host = parts.hostname or "127.0.0.1"
        return cls(host, parts.port or (443 if tls else 80), tls, parts.path.rstrip("/"))

    @property
    def host_header(self) -> str:
        """The ``Host`` header value (port only when not the scheme's default)."""
        default = 443 if self.tls else 80
        return self.host if self.port == default else f"{self.host}:{self.port}"


class UpstreamConnection(asyncio.Protocol):
    """One keep-alive connection to the primary and the answer it is reading."""

    def __init__(self, pool: UpstreamPool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.receiver: Receiver | None = None
        self.headers: list[tuple[bytes, bytes]] = []
        self.got_head = False
        self.until_close = False
        self.stamp = 0
        self.last_activity = 0
        self.reused = False
        self.closed = False

    # ------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the transport."""
        # uvloop's transports are not registered as asyncio's classes (no isinstance).
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        """Stamp the bytes on arrival, then parse (callbacks below)."""
        self.stamp = self.last_activity = now()
        receiver = self.receiver
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(f"invalid HTTP answer from the primary: {exc}")
        # Head, pieces (and the end) of this read leave in one write to the client.
        if receiver is not None:
            receiver.flush()

    def eof_received(self) -> bool:
        """The primary closed its side: an answer read until close is complete."""
        if self.receiver is not None and self.got_head and self.until_close:
            receiver, self.receiver = self.receiver, None
            receiver.on_end()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        """Out of the pool; an unfinished answer is a failure of its exchange."""
        self.closed = True  # skipped by the pool when met among the idle ones
        if self.receiver is not None:
            receiver, self.receiver = self.receiver, None
            reason = "the primary closed the connection mid-answer"
            receiver.on_lost(reason if exc is None else f"{reason}: {exc}", self.got_head)

    def pause_writing(self) -> None:  # the request is small; nothing to throttle
        """Nothing to do: requests are written whole."""

    def resume_writing(self) -> None:
        """Nothing to do: requests are written whole."""

    # ------------------------------------------------------------ httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        """One header of the answer."""
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        """The answer's head is in: its receiver starts answering the client."""
        status = self.parser.get_status_code()
        if status < 200:  # an interim answer (100 Continue): the real one follows
            self.headers = []
            return
        self.got_head = True
        names = {name for name, _ in self.headers}
        self.until_close = b"content-length" not in names and b"transfer-encoding" not in names
        if self.receiver is not None:
            self.receiver.on_head(status, self.headers)

    def on_body(self, body: bytes) -> None:
        """A piece of the body, with the stamp of the bytes it came in."""
        if self.receiver is not None:
            self.receiver.on_body(body, self.stamp)

    def on_message_complete(self) -> None:
        """The answer is complete: the connection is reusable if both sides keep it."""
        if not self.got_head:
            return
        receiver, self.receiver = self.receiver, None
        keep = self.parser.should_keep_alive() and not self.until_close
        if receiver is not None:
            receiver.on_end()
        if keep and not self.closed:
            self.pool.give_back(self)
        elif self.transport is not None:
            self.transport.close()

    # ------------------------------------------------------------ the exchange

    def send(self, request: bytes, receiver: Receiver) -> None:
        """Write ``request`` (head and body in one piece); its answer goes to ``receiver``."""
        assert self.transport is not None
        self.receiver = receiver
        self.headers = []
        self.got_head = self.until_close = False
        self.last_activity = now()
        self.transport.write(request)

    def abandon(self) -> None:
        """The client went away: stop reading this answer and close the connection."""
        self.receiver = None
        if self.transport is not None:
            self.transport.abort()

    def pause_reading(self) -> None:
        """The client reads slower than the primary sends: stop reading for now."""
        if self.transport is not None and not self.closed:
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        """The client caught up."""
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()

    def _fail(self, reason: str) -> None:
        receiver, self.receiver = self.receiver, None
        if self.transport is not None:
            self.transport.abort()
        if receiver is not None:
            receiver.on_lost(reason, self.got_head)


class UpstreamPool:
    """Idle keep-alive connections to one origin; new ones are opened on demand."""

    def __init__(self, origin: Origin, connect_timeout_s: float, max_idle: int = 1024) -> None:
        self.origin = origin
        self.connect_timeout_s = connect_timeout_s
        self.max_idle = max_idle
        self._idle: deque[UpstreamConnection] = deque()
        self._ssl = ssl.create_default_context() if origin.tls else None
        self.opened = 0

    def take(self) -> UpstreamConnection | None:
        """An idle connection (most recently used first), or None."""
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed:
                connection.reused = True
                return connection
        return None

    async def connect(self) -> UpstreamConnection:
        """A new connection (OSError or TimeoutError when the primary cannot be reached)."""
        loop = asyncio.get_running_loop()
        origin = self.origin
        _, connection = await asyncio.wait_for(
            loop.create_connection(
                lambda: UpstreamConnection(self),
                origin.host,
                origin.port,
                ssl=self._ssl,
                server_hostname=origin.host if self._ssl else None,
            ),
            self.connect_timeout_s,
        )
        self.opened += 1
        return connection

    def give_back(self, connection: UpstreamConnection) -> None:
        """Keep ``connection`` for a later request (closed beyond ``max_idle``)."""
        if len(self._idle) >= self.max_idle and connection.transport is not None:
            connection.transport.close()
            return
        self._idle.append(connection)

    def close(self) -> None:
        """Close every idle connection."""
        while self._idle:
            connection = self._idle.pop()
            if connection.transport is not None:
                connection.transport.close()
