"""An httpx transport that stamps response bytes when they arrive, not when they are read.

With httpx's API over aiohttp (or httpcore), a chunk is timed when the coroutine that
iterates ``response.aiter_raw()`` is next scheduled. When many streams' bytes arrive
together, that coroutine runs after every other stream's parsing and decoding, so the
stamp carries the client's own queueing: 77/259 ms TTFT error p50/p99 at 256 streams
(benchmarks/client_accuracy.py). Here the bytes are stamped with ``perf_counter_ns()``
first thing in ``asyncio.Protocol.data_received``, the earliest point Python sees them,
and the stamp travels with the bytes to the reader (``arrival_of(response).last``).

    ArrivalTransport      httpx.AsyncBaseTransport; a pool of connections per origin,
                          no cap (the load shape sets concurrency, never the pool)
      _Connection         asyncio.Protocol: one HTTP/1.1 keep-alive connection, httptools'
                          response parser (llhttp: chunked decoding, lengths, keep-alive)
        ArrivalStream     the response body: (stamp, bytes) pairs, as httpx byte chunks

Errors are raised as httpx exceptions so ``workers.client.errors`` classifies them as it
does any httpx transport's: refused/unresolvable/TLS failure → ``ConnectError``, connect
deadline → ``ConnectTimeout``, server silent for the read timeout → ``ReadTimeout``,
stream cut or malformed → ``RemoteProtocolError`` / ``ReadError``.

The read timeout is the longest silence of the server while a response is due (from the
request written to the response's last byte), whether or not anyone is reading — the
stall DOMAIN §1 means. HTTP/1.1 only, no proxies of its own (httpx's environment proxy
mounts still take precedence), no DNS cache (connections are long-lived and reused).
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import AsyncIterator
from time import perf_counter_ns
from typing import cast

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

Origin = tuple[bytes, bytes, int, str | None]  # scheme, host, port, TLS server name


class ArrivalStream(httpx.AsyncByteStream):
    """A response body as httpx byte chunks, each with the ``perf_counter_ns`` stamp of the
    ``data_received`` call that delivered it.

    While iterating, ``last`` is the arrival stamp of the chunk just yielded (httpx's
    ``aiter_raw()`` passes chunks through one for one); ``end`` is the arrival of the
    bytes that completed the body. Bytes delivered by one ``data_received`` are joined
    into one chunk; bytes of different arrivals never are.
    """

    __slots__ = ("_buffered", "_chunks", "_done", "_error", "_owner", "_stamps", "_waiter",
                 "end", "last")  # fmt: skip

    def __init__(self, owner: _Connection) -> None:
        self._chunks: deque[bytes] = deque()
        self._stamps: deque[int] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._done = False
        self._error: BaseException | None = None
        self._buffered = 0
        self._owner: _Connection | None = owner  # while the body is still arriving
        self.last = 0
        self.end: int | None = None

    # -- producer side (the connection, inside data_received) --

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
        chunks, stamps = self._chunks, self._stamps
        while True:
            if chunks:
                chunk = chunks.popleft()
                self.last = stamps.popleft()
                self._buffered -= len(chunk)
                if self._owner is not None and self._buffered < _LOW_WATER:
                    self._owner.resume()
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


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection; one request at a time, kept alive between them."""

    __slots__ = ("_body_to_eof", "_head_only", "_headers", "_informational", "_last_rx",
                 "_loop", "_parser", "_paused", "_pool", "_read_timeout", "_reason",
                 "_received", "_stamp", "_stream", "_timer", "_transport", "_waiter",
                 "_writable", "closed", "idle_since", "origin", "served")  # fmt: skip

    def __init__(self, pool: ArrivalTransport, origin: Origin) -> None:
        self._pool = pool
        self.origin = origin
        self._loop = asyncio.get_running_loop()
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self._stamp = 0  # arrival of the bytes being parsed
        self._last_rx = 0
        self._waiter: asyncio.Future[_Head] | None = None  # the response head, while due
        self._stream: ArrivalStream | None = None  # the body, while arriving
        self._headers: list[tuple[bytes, bytes]] = []
        self._reason = b""
        self._informational = False
        self._head_only = False
        self._body_to_eof = False
        self._received = False
        self._paused = False
        self._writable: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._read_timeout: float | None = None
        self.closed = False
        self.served = 0
        self.idle_since = 0.0

    @property
    def busy(self) -> bool:
        """True while a response is due or its body is arriving."""
        return self._waiter is not None or self._stream is not None

    # -- asyncio.Protocol --

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have its methods.
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        # The stamp every byte of this call carries: nothing else runs before it.
        self._stamp = self._last_rx = perf_counter_ns()
        if not self.busy:
            self.close()  # nothing was asked: a server speaking out of turn
            return
        self._received = True
        try:
            self._parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            self._fail(httpx.RemoteProtocolError(f"malformed HTTP response: {exc!r}"))

    def eof_received(self) -> bool | None:
        return None  # close; connection_lost settles the exchange

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._pool.forget(self)
        self.resume_writing()  # a writer waiting wakes up and finds the connection closed
        if not self.busy:
            return
        stream = self._stream
        if stream is not None and self._body_to_eof and exc is None:
            # A body without length or chunking ends when the server closes (RFC 9112 §6.3).
            self._done_exchange()
            stream._finish(perf_counter_ns())
        elif not self._received and self.served and exc is None:
            self._fail(_StaleConnection("keep-alive connection closed by the server"))
        elif exc is not None:
            self._fail(httpx.ReadError(f"connection lost: {exc}"))
        else:
            self._fail(httpx.RemoteProtocolError("server closed the connection mid-response"))

    def pause_writing(self) -> None:
        self._writable = self._loop.create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._writable = None

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
            stream._finish(self._stamp)
            self.close()

    def on_body(self, body: bytes) -> None:
        if self._stream is not None:
            self._stream._push(body, self._stamp)

    def on_message_complete(self) -> None:
        if self._informational:
            self._informational = False
            return
        stream = self._stream
        if stream is None:
            return
        self._done_exchange()
        stream._finish(self._stamp)
        if self._parser.should_keep_alive() and not self.closed:
            self.served += 1
            self._pool.release(self)
        else:
            self.close()

    # -- used by the transport --

    def begin(self, head_only: bool) -> asyncio.Future[_Head]:
        """Expect the answer to a request about to be written."""
        self._waiter = waiter = self._loop.create_future()
        self._head_only = head_only
        self._received = False
        return waiter

    def write(self, data: bytes) -> None:
        """Queue bytes of the request (asyncio's transport buffers them)."""
        if self._transport is None or self.closed:
            raise httpx.WriteError("connection closed")
        self._transport.write(data)

    async def drain(self, write_timeout_s: float | None) -> None:
        """Wait while the socket's send buffer is full (only a large body gets here)."""
        writable = self._writable
        if writable is None:
            return
        try:
            async with asyncio.timeout(write_timeout_s):
                await writable
        except TimeoutError:
            raise httpx.WriteTimeout("request body not sent in time") from None

    def sent(self, read_timeout: float | None) -> None:
        """The request is written: from now on the server's silence is timed."""
        self._last_rx = perf_counter_ns()
        self._read_timeout = read_timeout
        if read_timeout is not None:
            self._timer = self._loop.call_later(read_timeout, self._check_silence)

    def pause(self) -> None:
        """Stop reading the socket (the reader is far behind)."""
        if not self._paused and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()

    def resume(self) -> None:
        """Read the socket again."""
        if self._paused and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()

    def abandon(self) -> None:
        """The caller gave up on the exchange (cancelled, or left the body unread)."""
        if self.busy:
            self._done_exchange()
            self.close()

    def close(self) -> None:
        """Close now; buffered writes are dropped (no exchange is worth finishing)."""
        if self._transport is not None and not self.closed:
            self.closed = True
            self._transport.abort()
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
        silent_s = (perf_counter_ns() - self._last_rx) / 1e9
        if self._paused:
            silent_s = 0.0  # we stopped reading, the server did not stop writing
        if silent_s >= timeout:
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
    """HTTP/1.1 over asyncio protocols, for ``httpx.AsyncClient(transport=...)``.

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

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request``, return as soon as the response head arrived."""
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        url = request.url
        scheme = url.raw_scheme
        if scheme not in (b"http", b"https"):
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {url.scheme!r}")
        port = url.port or (443 if scheme == b"https" else 80)
        server_name = request.extensions.get("sni_hostname")
        origin: Origin = (scheme, url.raw_host, port, server_name)
        head = _request_head(request)
        try:
            body: bytes | None = request.content
        except httpx.RequestNotRead:
            body = None  # a streamed body: written piece by piece below
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
        tls = self._ssl_context() if scheme == b"https" else None
        hostname = host.decode("ascii")
        try:
            async with asyncio.timeout(connect_timeout_s):
                _, connection = await loop.create_connection(
                    lambda: _Connection(self, origin),
                    hostname,
                    port,
                    ssl=tls,
                    server_hostname=(server_name or hostname) if tls else None,
                )
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connect to {hostname}:{port} timed out") from None
        except OSError as exc:  # refused, unreachable, DNS (gaierror), TLS (SSLError)
            raise httpx.ConnectError(f"connect to {hostname}:{port}: {exc}") from exc
        self._open.add(connection)
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
