"""An httpx transport that stamps response bytes when they arrived, not when they are read.

With httpx's API over aiohttp (or httpcore), a chunk is timed when the coroutine that
iterates ``response.aiter_raw()`` gets its turn. When many streams' bytes arrive
together, that coroutine runs after every other stream's parsing and decoding, so the
stamp carries the client's own queueing: 77/259 ms TTFT error p50/p99 at 256 streams
(benchmarks/client_accuracy.py). Stamping in ``asyncio.Protocol.data_received`` only
moves the problem: bytes still wait in the kernel while the loop is busy (a burst of
256 requests being built keeps it busy for tens of ms), and measured p99 stayed at
~40 ms. So this transport reads its sockets itself (``loop.add_reader`` + ``recvmsg``)
and asks Linux for the receive time of the bytes (``SO_TIMESTAMPNS``, the moment the
kernel queued them on the socket), converted to the ``perf_counter_ns`` clock of every
other stamp. Elsewhere the stamp is the read time, as early as Python sees the bytes.
The stamp travels with the bytes to the reader: ``arrival_of(response).last``.

    ArrivalTransport      httpx.AsyncBaseTransport: connections pooled per origin without
                          a cap (the load shape sets concurrency, never the pool), TLS
      _Connection         one HTTP/1.1 keep-alive socket; httptools' response parser
                          (llhttp: chunked decoding, lengths, keep-alive)
        ArrivalStream     the response body: (stamp, bytes) pairs, as httpx byte chunks

Errors are raised as httpx exceptions so ``workers.client.errors`` classifies them as it
does any httpx transport's: refused/unresolvable/TLS failure → ``ConnectError``, connect
deadline → ``ConnectTimeout``, server silent for the read timeout → ``ReadTimeout``,
stream cut or malformed → ``RemoteProtocolError`` / ``ReadError``.

The read timeout is the longest silence of the server while a response is due (from the
request written to the response's last byte), whether or not anyone is reading — the
stall DOMAIN §1 means. HTTP/1.1 only; no proxies of its own (httpx's environment proxy
mounts take precedence); no DNS cache (connections are long-lived and reused).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import os
import select
import socket
import ssl
import struct
import sys
from collections import deque
from collections.abc import AsyncIterator
from time import perf_counter_ns, time_ns
from typing import Any

import httptools
import httpx

__all__ = ["ARRIVAL_EXTENSION", "ArrivalStream", "ArrivalTransport", "arrival_of"]

ARRIVAL_EXTENSION = "tokenbench.arrival"

# Past this many unread bytes a response stops reading its socket until the reader
# catches up, so a slow reader (a gateway relaying to a slow client) cannot fill memory.
# An LLM stream never gets near it; while paused, arrival stamps are late by design.
_HIGH_WATER = 4 * 1024 * 1024
_LOW_WATER = 1024 * 1024
_NO_BODY_STATUS = (204, 304)
_READ_SIZE = 64 * 1024

# SO_TIMESTAMPNS (asm-generic/socket.h; Python's socket module does not name it): each
# recvmsg() carries the CLOCK_REALTIME at which the kernel received the last bytes read.
_SO_TIMESTAMPNS = 35 if sys.platform == "linux" else None
_TIMESPEC = struct.Struct("@qq")
_ANCILLARY_SIZE = socket.CMSG_SPACE(_TIMESPEC.size) if _SO_TIMESTAMPNS else 0
# While the loop is busy (a burst of requests being built, many events being decoded),
# sockets are also read from inside that work at least this often (ArrivalTransport.sweep),
# so writes of one stream seldom wait together long enough for the kernel to merge them.
_SWEEP_NS = 1_000_000
# A kernel stamp older than this (or in the future) means the wall clock was stepped
# between receive and read: the read time is used instead.
_MAX_AGE_NS = 60 * 1_000_000_000

Origin = tuple[bytes, bytes, int, str | None]  # scheme, host, port, TLS server name


def _arrival(ancillary: list[tuple[int, int, bytes]]) -> int:
    """``perf_counter_ns`` of the kernel's receive time in ``ancillary``, else of now."""
    now = perf_counter_ns()
    for level, kind, payload in ancillary:
        if kind == _SO_TIMESTAMPNS and level == socket.SOL_SOCKET:
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

    __slots__ = ("_buffered", "_chunks", "_done", "_error", "_owner", "_pool", "_stamps",
                 "_waiter", "end", "last")  # fmt: skip

    def __init__(self, owner: _Connection) -> None:
        self._chunks: deque[bytes] = deque()
        self._stamps: deque[int] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._done = False
        self._error: BaseException | None = None
        self._buffered = 0
        self._owner: _Connection | None = owner  # while the body is still arriving
        self._pool = owner._pool
        self.last = 0
        self.end: int | None = None

    # -- producer side (the connection, as bytes are read) --

    def _push(self, data: bytes, stamp: int) -> None:
        if self._stamps and self._stamps[-1] == stamp:
            self._chunks[-1] += data  # same arrival: one chunk, one reader wake-up
        else:
            self._chunks.append(data)
            self._stamps.append(stamp)
        self._buffered += len(data)
        if self._buffered > _HIGH_WATER and self._owner is not None:
            self._owner.pause()
        self._wake()

    def _finish(self, stamp: int) -> None:
        self.end = stamp
        self._done = True
        self._owner = None
        self._wake()

    def _fail(self, error: BaseException) -> None:
        # Bytes that arrived before the failure are still delivered, then the error.
        self._error = error
        self._done = True
        self._owner = None
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- consumer side (httpx) --

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks, stamps, pool = self._chunks, self._stamps, self._pool
        while True:
            pool.sweep()
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


_Head = tuple[int, bytes, list[tuple[bytes, bytes]], ArrivalStream]


class _StaleConnection(httpx.RemoteProtocolError):
    """A reused keep-alive connection closed before any byte of the answer: the server
    dropped it while idle, so the request is sent again on a new one."""


class _Tls:
    """TLS over the connection's own socket I/O (ssl's memory BIOs, as asyncio does)."""

    __slots__ = ("incoming", "outgoing", "session")

    def __init__(self, context: ssl.SSLContext, server_name: str) -> None:
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.session = context.wrap_bio(self.incoming, self.outgoing, server_hostname=server_name)

    async def handshake(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
        while True:
            try:
                self.session.do_handshake()
            except ssl.SSLWantReadError:
                if self.outgoing.pending:
                    await loop.sock_sendall(sock, self.outgoing.read())
                data = await loop.sock_recv(sock, _READ_SIZE)
                if not data:
                    raise ConnectionResetError(
                        "connection closed during the TLS handshake"
                    ) from None
                self.incoming.write(data)
            else:
                break
        if self.outgoing.pending:
            await loop.sock_sendall(sock, self.outgoing.read())

    def decrypt(self, data: bytes) -> tuple[bytes, bool]:
        """Plaintext of ``data`` and whether the server ended the session (close_notify)."""
        self.incoming.write(data)
        pieces: list[bytes] = []
        ended = False
        try:
            while piece := self.session.read(_READ_SIZE):
                pieces.append(piece)
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLZeroReturnError:
            ended = True
        return b"".join(pieces), ended


class _Connection:
    """One HTTP/1.1 connection; one request at a time, kept alive between them."""

    __slots__ = ("_body_to_eof", "_fd", "_got_bytes", "_head_only", "_headers",
                 "_informational", "_last_rx", "_loop", "_out", "_parser", "_pool",
                 "_read_timeout", "_reason", "_sock", "_stream", "_timer", "_tls", "_waiter",
                 "_writable", "closed", "idle_since", "origin", "paused",
                 "served")  # fmt: skip

    def __init__(
        self, pool: ArrivalTransport, origin: Origin, sock: socket.socket, tls: _Tls | None
    ) -> None:
        self._pool = pool
        self.origin = origin
        self._loop = asyncio.get_running_loop()
        self._sock = sock
        self._fd = sock.fileno()
        self._tls = tls
        self._parser = httptools.HttpResponseParser(self)
        self._out = bytearray()  # bytes the socket did not take yet
        self._writable: asyncio.Future[None] | None = None
        self._last_rx = 0
        self._waiter: asyncio.Future[_Head] | None = None  # the response head, while due
        self._stream: ArrivalStream | None = None  # the body, while arriving
        self._headers: list[tuple[bytes, bytes]] = []
        self._reason = b""
        self._informational = False
        self._head_only = False
        self._body_to_eof = False
        self._got_bytes = False
        self._timer: asyncio.TimerHandle | None = None
        self._read_timeout: float | None = None
        self.paused = False
        self.closed = False
        self.served = 0
        self.idle_since = 0.0
        self._loop.add_reader(self._fd, self._on_readable)

    @property
    def busy(self) -> bool:
        """True while a response is due or its body is arriving."""
        return self._waiter is not None or self._stream is not None

    # -- socket I/O (loop callbacks) --

    def _on_readable(self) -> None:
        # One read per readiness: bytes that arrived apart keep apart stamps as long as
        # the loop reads them before the next write lands. Once queued unread, the kernel
        # merges segments and keeps the newest stamp, so writes that wait together for
        # a busy loop share the arrival of the last one (still never later than it).
        try:
            data, ancillary, _, _ = self._sock.recvmsg(_READ_SIZE, _ANCILLARY_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lost(exc)
            return
        if not data:
            self._lost(None)
            return
        self._piece(data, _arrival(ancillary))

    def _piece(self, data: bytes, stamp: int) -> None:
        if self._tls is None:
            self._received(data, stamp)
            return
        try:
            data, ended = self._tls.decrypt(data)
        except ssl.SSLError as exc:
            self._lost(exc)
            return
        if self._tls.outgoing.pending:  # e.g. a TLS 1.3 key update to answer
            self._send(self._tls.outgoing.read())
        if data:
            self._received(data, stamp)
        if ended:
            self._lost(None)

    def _received(self, data: bytes, stamp: int) -> None:
        self._last_rx = stamp
        if not self.busy:
            self.close()  # nothing was asked: a server speaking out of turn
            return
        self._got_bytes = True
        try:
            self._parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            self._fail(httpx.RemoteProtocolError(f"malformed HTTP response: {exc!r}"))

    def _send(self, data: bytes) -> None:
        # Never raises: a failed send loses the connection, and the exchange's waiter
        # carries the error to whoever awaits the answer.
        if self._out:
            self._out += data  # earlier bytes still queued: keep the order
            return
        try:
            sent = self._sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as exc:
            self._lost(exc)
            return
        if sent < len(data):
            self._out += data[sent:]
            self._writable = self._loop.create_future()
            self._loop.add_writer(self._fd, self._on_writable)

    def _on_writable(self) -> None:
        try:
            sent = self._sock.send(self._out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lost(exc)
            return
        del self._out[:sent]
        if not self._out:
            self._loop.remove_writer(self._fd)
            self._wake_writer()

    def _wake_writer(self) -> None:
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            writable.set_result(None)

    def _lost(self, exc: BaseException | None) -> None:
        """The peer closed (``exc`` None) or the socket failed."""
        if self.closed:
            return
        self.close()
        stream = self._stream
        if not self.busy:
            return
        if stream is not None and self._body_to_eof and exc is None:
            # A body without length or chunking ends when the server closes (RFC 9112 §6.3).
            self._done_exchange()
            stream._finish(perf_counter_ns())
        elif not self._got_bytes and self.served:
            self._fail(_StaleConnection("keep-alive connection closed by the server"))
        elif exc is not None:
            self._fail(httpx.ReadError(f"connection lost: {exc}"))
        else:
            self._fail(httpx.RemoteProtocolError("server closed the connection mid-response"))

    # -- httptools callbacks --

    def on_message_begin(self) -> None:
        self._headers = []
        self._reason = b""

    def on_status(self, reason: bytes) -> None:
        self._reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200:
            self._informational = True  # 100 Continue and the like: the answer follows
            return
        waiter = self._waiter
        if waiter is None:  # a second answer to one request
            raise httpx.RemoteProtocolError("unexpected response")
        stream = self._stream = ArrivalStream(self)
        self._waiter = None
        self._body_to_eof = self._delimited_by_close(status)
        if not waiter.done():
            waiter.set_result((status, self._reason, self._headers, stream))
        if self._head_only:
            # llhttp does not know the request was HEAD and would wait for the body a
            # Content-Length announces; the answer is complete, the connection unusable.
            self._done_exchange()
            stream._finish(self._last_rx)
            self.close()

    def on_body(self, body: bytes) -> None:
        if self._stream is not None:
            self._stream._push(body, self._last_rx)

    def on_message_complete(self) -> None:
        if self._informational:
            self._informational = False
            return
        stream = self._stream
        if stream is None:
            return
        self._done_exchange()
        stream._finish(self._last_rx)
        if self._parser.should_keep_alive() and not self.closed:
            self.served += 1
            self._pool.release(self)
        else:
            self.close()

    # -- used by the transport and the stream --

    def begin(self, head_only: bool) -> asyncio.Future[_Head]:
        """Expect the answer to a request about to be written."""
        self._waiter = waiter = self._loop.create_future()
        self._head_only = head_only
        self._got_bytes = False
        return waiter

    def write(self, data: bytes) -> None:
        """Send bytes of the request (queued when the socket is full)."""
        if self.closed:
            raise httpx.WriteError("connection closed")
        if self._tls is not None:
            self._tls.session.write(data)
            data = self._tls.outgoing.read()
        self._send(data)

    async def drain(self, write_timeout_s: float | None) -> None:
        """Wait while bytes of the request are queued (only a large body gets here)."""
        writable = self._writable
        if writable is not None:
            try:
                async with asyncio.timeout(write_timeout_s):
                    await writable
            except TimeoutError:
                raise httpx.WriteTimeout("request body not sent in time") from None
        if self.closed:
            raise httpx.WriteError("connection closed while sending")

    def sent(self, read_timeout: float | None) -> None:
        """The request is written: from now on the server's silence is timed."""
        self._last_rx = perf_counter_ns()
        self._read_timeout = read_timeout
        if read_timeout is not None:
            self._timer = self._loop.call_later(read_timeout, self._check_silence)

    def pause(self) -> None:
        """Stop reading the socket (the reader is far behind)."""
        if not self.paused and not self.closed:
            self.paused = True
            self._loop.remove_reader(self._fd)

    def resume(self) -> None:
        """Read the socket again."""
        if self.paused and not self.closed:
            self.paused = False
            self._loop.add_reader(self._fd, self._on_readable)

    def abandon(self) -> None:
        """The caller gave up on the exchange (cancelled, or left the body unread)."""
        if self.busy:
            self._done_exchange()
            self.close()

    def close(self) -> None:
        """Close now; queued writes are dropped (no exchange is worth finishing)."""
        if not self.closed:
            self.closed = True
            if not self.paused:
                self._loop.remove_reader(self._fd)
            if self._out:
                self._loop.remove_writer(self._fd)
            self._pool.unwatch(self)  # before close: the descriptor number may be reused
            self._sock.close()
            self._wake_writer()  # a writer waiting in drain() finds the connection closed
        self._pool.forget(self)

    # -- internals --

    def _delimited_by_close(self, status: int) -> bool:
        if self._head_only or status in _NO_BODY_STATUS:
            return False
        for name, value in self._headers:
            lowered = name.lower()
            if lowered == b"content-length" or (
                lowered == b"transfer-encoding" and b"chunked" in value.lower()
            ):
                return False
        return True

    def _check_silence(self) -> None:
        self._timer = None
        timeout = self._read_timeout
        if not self.busy or timeout is None:
            return
        silent_s = 0.0 if self.paused else (perf_counter_ns() - self._last_rx) / 1e9
        if silent_s >= timeout:  # paused: we stopped reading, the server did not stop
            self._fail(httpx.ReadTimeout(f"no data from the server for {timeout:g} s"))
        else:
            self._timer = self._loop.call_later(timeout - silent_s, self._check_silence)

    def _done_exchange(self) -> None:
        self._waiter = None
        self._stream = None
        self.resume()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fail(self, error: httpx.TransportError) -> None:
        waiter, stream = self._waiter, self._stream
        self._done_exchange()
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
        if stream is not None:
            stream._fail(error)
        self.close()


class ArrivalTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 on sockets read with arrival stamps, for ``httpx.AsyncClient(transport=)``.

    Connections are pooled per origin without a cap and reused most-recent first;
    ``keepalive_expiry`` drops idle ones before a server would. Responses carry their
    :class:`ArrivalStream` in ``response.extensions[ARRIVAL_EXTENSION]``.
    """

    def __init__(
        self, *, verify: ssl.SSLContext | bool = True, keepalive_expiry: float | None = 30.0
    ) -> None:
        self._verify = verify
        self._ssl: ssl.SSLContext | None = None
        self._keepalive_expiry = keepalive_expiry
        # Idle connections per origin; a dict keeps release order, popitem() is LIFO.
        self._idle: dict[Origin, dict[_Connection, None]] = {}
        self._open: set[_Connection] = set()
        # Every open socket, watched a second time for sweep(); Linux only (epoll).
        self._poller = select.epoll() if hasattr(select, "epoll") else None
        self._watched: dict[int, _Connection] = {}
        self._next_sweep = 0

    def sweep(self, *, force: bool = False) -> None:
        """Read every socket with bytes waiting, if no sweep ran for _SWEEP_NS (or ``force``).

        Called from busy code paths (each chunk handed to a reader, each request sent).
        The loop itself reads only between its batches of callbacks; a batch of 256
        streams' work can take tens of ms, during which a stream's next write lands
        on its unread predecessor and the kernel merges the two under the later stamp.
        """
        now = perf_counter_ns()
        if (now < self._next_sweep and not force) or self._poller is None:
            return
        self._next_sweep = now + _SWEEP_NS
        for fd, _ in self._poller.poll(0):
            connection = self._watched.get(fd)
            if connection is not None and not connection.paused:
                connection._on_readable()

    def watch(self, connection: _Connection) -> None:
        """Include a new connection's socket in sweeps."""
        if self._poller is not None:
            self._poller.register(connection._fd, select.EPOLLIN)
            self._watched[connection._fd] = connection

    def unwatch(self, connection: _Connection) -> None:
        """Leave a closing connection's socket out of sweeps."""
        if self._watched.pop(connection._fd, None) is not None and self._poller is not None:
            self._poller.unregister(connection._fd)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request``, return as soon as the response head arrived."""
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        url = request.url
        scheme = url.raw_scheme
        if scheme not in (b"http", b"https"):
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {url.scheme!r}")
        port = url.port or (443 if scheme == b"https" else 80)
        origin: Origin = (scheme, url.raw_host, port, request.extensions.get("sni_hostname"))
        head = _request_head(request)
        try:
            body: bytes | None = request.content
        except httpx.RequestNotRead:
            body = None  # a streamed body: written piece by piece
        connection = self._idle_connection(origin)
        if connection is not None:
            if body is None:  # a streamed body cannot be sent twice: no second chance
                return await self._exchange(connection, request, head, body, timeouts)
            try:
                return await self._exchange(connection, request, head, body, timeouts)
            except _StaleConnection:
                pass  # the server closed it while idle and saw nothing: send again
        connection = await self._connect(origin, timeouts.get("connect"))
        return await self._exchange(connection, request, head, body, timeouts)

    async def _exchange(
        self,
        connection: _Connection,
        request: httpx.Request,
        head: bytes,
        body: bytes | None,
        timeouts: dict[str, float | None],
    ) -> httpx.Response:
        answer = connection.begin(request.method == "HEAD")
        try:
            if body is not None:
                connection.write(head + body)  # one write: one segment for small requests
            else:
                await _write_streamed(connection, head, request, timeouts.get("write"))
            connection.sent(timeouts.get("read"))
            self.sweep()  # after the write, so that this request's TTFT does not carry it
            status, reason, headers, stream = await answer
        except BaseException:
            connection.abandon()  # cancelled or failed mid-exchange: never reused
            raise
        return httpx.Response(
            status,
            headers=headers,
            stream=stream,
            extensions={
                "http_version": b"HTTP/1.1",
                "reason_phrase": reason,
                ARRIVAL_EXTENSION: stream,
            },
        )

    def _idle_connection(self, origin: Origin) -> _Connection | None:
        idle = self._idle.get(origin)
        if not idle:
            return None
        expiry = self._keepalive_expiry
        now = asyncio.get_running_loop().time()
        if expiry is not None:
            oldest = next(iter(idle))
            if now - oldest.idle_since > expiry:  # one lazy sweep step per request
                oldest.close()
        while idle:
            connection, _ = idle.popitem()
            if connection.closed:
                continue
            if expiry is not None and now - connection.idle_since > expiry:
                # The freshest is stale, so are all older ones.
                for old in [connection, *idle]:
                    old.close()
                return None
            return connection
        return None

    async def _connect(self, origin: Origin, connect_timeout_s: float | None) -> _Connection:
        scheme, host, port, server_name = origin
        loop = asyncio.get_running_loop()
        hostname = host.decode("ascii")
        try:
            async with asyncio.timeout(connect_timeout_s):
                sock = await _open_socket(loop, hostname, port)
                try:
                    tls = None
                    if scheme == b"https":
                        tls = _Tls(self._ssl_context(), server_name or hostname)
                        await tls.handshake(loop, sock)
                except BaseException:
                    sock.close()
                    raise
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connect to {hostname}:{port} timed out") from None
        except OSError as exc:  # refused, unreachable, DNS (gaierror), TLS (SSLError)
            raise httpx.ConnectError(f"connect to {hostname}:{port}: {exc}") from exc
        connection = _Connection(self, origin, sock, tls)
        self._open.add(connection)
        self.watch(connection)
        return connection

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            verify = self._verify
            context = verify if isinstance(verify, ssl.SSLContext) else None
            if context is None:
                context = httpx.create_ssl_context(verify=verify)
                context.set_alpn_protocols(["http/1.1"])
            self._ssl = context
        return self._ssl

    def release(self, connection: _Connection) -> None:
        """A connection finished an exchange and may serve the next one."""
        connection.idle_since = connection._loop.time()
        self._idle.setdefault(connection.origin, {})[connection] = None

    def forget(self, connection: _Connection) -> None:
        """A connection closed: drop it from the pool."""
        self._open.discard(connection)
        idle = self._idle.get(connection.origin)
        if idle is not None:
            idle.pop(connection, None)

    async def aclose(self) -> None:
        """Close every connection; bodies still arriving end with a ReadError."""
        for connection in list(self._open):
            if connection.busy:
                connection._fail(httpx.ReadError("transport closed"))
            connection.close()
        self._idle.clear()
        if self._poller is not None:
            self._poller.close()
            self._poller = None


async def _open_socket(loop: asyncio.AbstractEventLoop, host: str, port: int) -> socket.socket:
    """A connected non-blocking TCP socket to the first address of ``host`` that answers."""
    addresses: list[tuple[int, Any]]
    try:
        version = ipaddress.ip_address(host).version  # no lookup (nor thread) for literals
        addresses = [(socket.AF_INET6 if version == 6 else socket.AF_INET, (host, port))]
    except ValueError:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addresses = [(family, address) for family, _, _, _, address in infos]
    error: OSError = OSError(f"no address for {host}")
    for family, address in addresses:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if _SO_TIMESTAMPNS is not None:
                with contextlib.suppress(OSError):  # without it: stamps at read time
                    sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
            await _sock_connect(loop, sock, address)
        except OSError as exc:
            sock.close()
            error = exc
        except BaseException:
            sock.close()
            raise
        else:
            return sock
    raise error


async def _sock_connect(loop: asyncio.AbstractEventLoop, sock: socket.socket, address: Any) -> None:
    code = sock.connect_ex(address)
    if code in (errno.EINPROGRESS, errno.EAGAIN):
        # A loopback connect is usually complete by now: check without yielding, so a
        # burst of new streams does not wait for every other task before writing.
        poller = select.poll()
        poller.register(sock, select.POLLOUT)
        if not poller.poll(0):
            writable: asyncio.Future[None] = loop.create_future()

            def ready() -> None:
                if not writable.done():
                    writable.set_result(None)

            loop.add_writer(sock, ready)
            try:
                await writable
            finally:
                loop.remove_writer(sock)
        code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if code:
        raise OSError(code, os.strerror(code))


def _request_head(request: httpx.Request) -> bytes:
    lines = [b"%s %s HTTP/1.1\r\n" % (request.method.encode("ascii"), request.url.raw_path)]
    for name, value in request.headers.raw:
        if b"\r" in value or b"\n" in value or b"\r" in name or b"\n" in name:
            raise httpx.LocalProtocolError(f"line break in header {name!r}")
        lines.append(b"%s: %s\r\n" % (name, value))
    lines.append(b"\r\n")
    return b"".join(lines)


async def _write_streamed(
    connection: _Connection, head: bytes, request: httpx.Request, write_timeout_s: float | None
) -> None:
    # httpx announces a streamed body of unknown length as chunked; frame it so.
    chunked = request.headers.get("transfer-encoding", "").lower() == "chunked"
    connection.write(head)
    stream = request.stream
    if not isinstance(stream, httpx.AsyncByteStream):
        raise RuntimeError("a synchronous request body on an async transport")
    async for piece in stream:
        if piece:
            connection.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            await connection.drain(write_timeout_s)
    if chunked:
        connection.write(b"0\r\n\r\n")
