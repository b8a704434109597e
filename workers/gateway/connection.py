"""One client connection of the gateway: requests parsed by httptools, answered in order.

Requests are bounded (head ``MAX_HEAD_BYTES``: 431 beyond; body the gateway's
``max_body_bytes``: 413, refused before it is read when announced), pipelined up to
``MAX_PIPELINED`` (reading pauses beyond), and handed to the gateway's routes one at a
time (``workers/gateway/server.py``); an answer is the gateway's own (``respond``) or an
:class:`~workers.gateway.exchange.Exchange` relaying the primary's
(``workers/gateway/exchange.py``).
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import httptools

from workers.gateway.exchange import Exchange, error_body, now, reason_phrase

if TYPE_CHECKING:
    from workers.gateway.server import Gateway

MAX_HEAD_BYTES = 64 * 1024
MAX_PIPELINED = 32
LINGER_S = 2.0


@dataclass(slots=True)
class Request:
    """One request as read from a client."""

    method: bytes
    path: bytes
    headers: dict[bytes, bytes]
    body: bytes
    keep_alive: bool
    http11: bool
    received: int = field(default_factory=now)


class ClientConnection(asyncio.Protocol):
    """One client connection: requests parsed by httptools, answered in order."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.pending: deque[Request] = deque()
        self.exchange: Exchange | None = None
        self.busy = False
        self.keep_alive = True
        self.chunked = True
        self.rejected = False
        self.idle_since = now()
        self._url = b""
        self._headers: dict[bytes, bytes] = {}
        self._body: list[bytes] = []
        self._size = 0
        self._head = 0

    # ------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the transport; the gateway knows its clients (idle timeout, shutdown)."""
        # uvloop's transports are not registered as asyncio's classes (no isinstance).
        self.transport = cast(asyncio.Transport, transport)
        self.gateway.clients.add(self)

    def data_received(self, data: bytes) -> None:
        """Parse; complete requests are answered in order."""
        if self.rejected:
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self.reject(400, "protocol upgrades are not supported")
        except httptools.HttpParserError:
            self.reject(400, "invalid HTTP request")

    def connection_lost(self, exc: Exception | None) -> None:
        """An answer in flight is cancelled (and recorded so)."""
        self.gateway.clients.discard(self)
        self.transport = None
        if self.exchange is not None and not self.exchange.finished:
            self.exchange.cancel()
        self.exchange = None
        self.pending.clear()

    def pause_writing(self) -> None:
        """The client reads slower than the primary sends."""
        if self.exchange is not None:
            self.exchange.pause()

    def resume_writing(self) -> None:
        """The client caught up."""
        if self.exchange is not None:
            self.exchange.resume()

    # ------------------------------------------------------------ httptools callbacks

    def on_message_begin(self) -> None:
        """A new request starts."""
        self._url, self._headers, self._body, self._size, self._head = b"", {}, [], 0, 0

    def on_url(self, url: bytes) -> None:
        """(Part of) the request target."""
        self._url += url
        self._head += len(url)
        if self._head > MAX_HEAD_BYTES:
            self.reject(431, "request head too large")

    def on_header(self, name: bytes, value: bytes) -> None:
        """One header (names lower-cased)."""
        self._headers[name.lower()] = value
        self._head += len(name) + len(value)
        if self._head > MAX_HEAD_BYTES:
            self.reject(431, "request head too large")

    def on_headers_complete(self) -> None:
        """Refuse an announced oversized body before reading it; honour 100-continue."""
        length = self._headers.get(b"content-length")
        limit = self.gateway.max_body_bytes
        if length is not None and length.isdigit() and int(length) > limit:
            self.reject(413, f"request body larger than {limit} bytes")
            return
        if self._headers.get(b"expect", b"").lower() == b"100-continue":
            self.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        """A piece of the body (bounded)."""
        self._size += len(body)
        if self._size > self.gateway.max_body_bytes:
            self.reject(413, f"request body larger than {self.gateway.max_body_bytes} bytes")
            return
        self._body.append(body)

    def on_message_complete(self) -> None:
        """The request is whole: answer it now, or after the ones before it."""
        if self.rejected:
            return
        path = self._url.partition(b"?")[0]
        body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        parser = self.parser
        request = Request(
            parser.get_method(),
            path,
            self._headers,
            body,
            parser.should_keep_alive(),
            parser.get_http_version() != "1.0",
        )
        self.pending.append(request)
        if len(self.pending) > MAX_PIPELINED and self.transport is not None:
            self.transport.pause_reading()
        if not self.busy:
            self.next()

    # ------------------------------------------------------------ answering

    def next(self) -> None:
        """Answer the oldest pending request."""
        if self.busy or not self.pending or self.transport is None:
            return
        request = self.pending.popleft()
        if len(self.pending) == MAX_PIPELINED and self.transport is not None:
            self.transport.resume_reading()
        self.busy = True
        self.chunked = request.http11
        # An HTTP/1.0 client's relayed body ends when the connection does.
        self.keep_alive = request.keep_alive and request.http11 and not self.gateway.stopping
        self.gateway.route(self, request)

    def frame_piece(self, data: bytes) -> bytes:
        """A piece of a relayed body as written: one chunk (HTTP/1.1), or as is (1.0)."""
        return b"%x\r\n%b\r\n" % (len(data), data) if self.chunked else data

    def write(self, data: bytes) -> None:
        """Write to the client (nothing when it is gone)."""
        if self.transport is not None:
            self.transport.write(data)

    def respond(
        self,
        status: int,
        body: bytes,
        key: str | None = None,
        content_type: bytes = b"application/json",
    ) -> None:
        """A whole answer of the gateway's own."""
        extra = b"" if key is None else b"x-tokenbench-request-key: %s\r\n" % key.encode()
        close = b"" if self.keep_alive else b"connection: close\r\n"
        self.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n%b%b\r\n%b"
            % (status, reason_phrase(status), content_type, len(body), extra, close, body)
        )
        self.done()

    def done(self) -> None:
        """The current answer is written: next request, or close."""
        self.exchange = None
        self.busy = False
        self.idle_since = now()
        if not self.keep_alive:
            if self.transport is not None and not self.rejected:
                self.transport.close()
            return
        if self.pending:
            asyncio.get_running_loop().call_soon(self.next)

    def reject(self, status: int, message: str) -> None:
        """Answer an unreadable or oversized request and close the connection."""
        if self.rejected:
            return
        self.rejected = True
        if status == 413:
            self.gateway.stats.too_large += 1
        else:
            self.gateway.stats.bad_requests += 1
        if self.busy or self.transport is None:  # mid-answer: nothing sane to add
            self.abort()
            return
        self.keep_alive = False
        self.busy = True
        transport = self.transport
        self.respond(status, error_body(status, message))
        # Lingering close, as nginx does: half-close and drain what the client is still
        # sending, so that our close does not reset the connection before it read the
        # answer (unread input at close makes the kernel send RST, not FIN).
        if transport.can_write_eof():
            transport.write_eof()
        asyncio.get_running_loop().call_later(LINGER_S, transport.close)

    def abort(self) -> None:
        """Drop the connection at once."""
        if self.transport is not None:
            self.transport.abort()
