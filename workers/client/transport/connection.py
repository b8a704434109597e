"""One HTTP/1.1 keep-alive connection of the arrival transport: socket I/O read with
arrival stamps, TLS over memory BIOs, httptools' response parser (chunked decoding,
lengths, keep-alive), and the errors mapped to httpx's exceptions."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import os
import select
import socket
import ssl
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any, Protocol

import httptools
import httpx

from workers.client.transport.arrival import (
    ANCILLARY_SIZE,
    NO_BODY_STATUS,
    READ_GAPS,
    READ_SIZE,
    SO_TIMESTAMPNS,
    ArrivalStream,
    kernel_arrival,
)
from workers.client.transport.phases import Phases

if TYPE_CHECKING:  # only the type is needed here
    from scenarios.security.egress import EgressGuard

Origin = tuple[bytes, bytes, int, str | None]  # scheme, host, port, TLS server name


class Pool(Protocol):
    """The transport that owns a connection, as the connection sees it (declared here,
    not imported, so that the pool depends on its connections and never the reverse)."""

    def release(self, connection: Connection) -> None:
        """Keep ``connection`` for reuse: its exchange ended cleanly."""
        ...

    def forget(self, connection: Connection) -> None:
        """Drop ``connection``: it closed."""
        ...

    def unwatch(self, connection: Connection) -> None:
        """Stop sweeping ``connection``'s socket."""
        ...

    def sweep(self) -> None:
        """Read every socket with bytes waiting (a body's reader calls it)."""
        ...


_Head = tuple[int, bytes, list[tuple[bytes, bytes]], ArrivalStream]


class StaleConnection(httpx.RemoteProtocolError):
    """A reused keep-alive connection closed before any byte of the answer: the server
    dropped it while idle, so the request is sent again on a new one."""


class Tls:
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
                data = await loop.sock_recv(sock, READ_SIZE)
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
            while piece := self.session.read(READ_SIZE):
                pieces.append(piece)
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLZeroReturnError:
            ended = True
        return b"".join(pieces), ended


class Connection:
    """One HTTP/1.1 connection; one request at a time, kept alive between them."""

    __slots__ = (
        "_body_to_eof",
        "_got_bytes",
        "_head_only",
        "_headers",
        "_informational",
        "_last_rx",
        "_out",
        "_parser",
        "_phases",
        "_pool",
        "_read_timeout",
        "_reason",
        "_send_at",
        "_sock",
        "_stream",
        "_timer",
        "_tls",
        "_waiter",
        "_writable",
        "_written_on_flush",
        "closed",
        "fd",
        "idle_since",
        "loop",
        "origin",
        "paused",
        "served",
    )  # fmt: skip

    def __init__(self, pool: Pool, origin: Origin, sock: socket.socket, tls: Tls | None) -> None:
        self._pool = pool
        self.origin = origin
        self.loop = asyncio.get_running_loop()
        self._sock = sock
        self.fd = sock.fileno()
        self._tls = tls
        self._parser = httptools.HttpResponseParser(self)
        self._out = bytearray()  # bytes the socket did not take yet
        self._writable: asyncio.Future[None] | None = None
        # The exchange's phases, and whether its request is written once _out empties.
        self._phases: Phases | None = None
        self._written_on_flush = False
        # When the last send() began: the bytes it handed over reached the kernel after
        # this, and any answer to them arrived after that (request written <= first byte).
        self._send_at = 0
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
        self.loop.add_reader(self.fd, self.on_readable)

    @property
    def busy(self) -> bool:
        """True while a response is due or its body is arriving."""
        return self._waiter is not None or self._stream is not None

    # -- socket I/O (loop callbacks) --

    def on_readable(self) -> None:
        # One read per readiness: bytes that arrived apart keep apart stamps as long as
        # the loop reads them before the next write lands. Once queued unread, the kernel
        # merges segments and keeps the newest stamp, so writes that wait together for
        # a busy loop share the arrival of the last one (still never later than it).
        # This runs once per token event of every stream: the common case is kept to
        # a few calls (docs/load.md, "CPU per token event").
        now = perf_counter_ns()
        gaps = READ_GAPS
        if now - gaps.last >= gaps.min_ns:
            gaps.looked(now)
        else:
            gaps.last = now
        try:
            data, ancillary, _, _ = self._sock.recvmsg(READ_SIZE, ANCILLARY_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lost(exc)
            return
        if not data:
            self._lost(None)
            return
        if self._tls is None:
            self._received(data, kernel_arrival(ancillary))
        else:
            self._arrived(data, kernel_arrival(ancillary))

    def _arrived(self, data: bytes, stamp: int) -> None:
        """Bytes of a TLS connection: decrypted, then received."""
        assert self._tls is not None
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
        if self._waiter is None and self._stream is None:  # not busy
            self.close()  # nothing was asked: a server speaking out of turn
            return
        self._got_bytes = True
        try:
            self._parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            self.fail(httpx.RemoteProtocolError(f"malformed HTTP response: {exc!r}"))

    def _send(self, data: bytes) -> None:
        # Never raises: a failed send loses the connection, and the exchange's waiter
        # carries the error to whoever awaits the answer.
        if self._out:
            self._out += data  # earlier bytes still queued: keep the order
            return
        try:
            self._send_at = perf_counter_ns()
            sent = self._sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as exc:
            self._lost(exc)
            return
        if sent < len(data):
            self._out += data[sent:]
            self._writable = self.loop.create_future()
            self.loop.add_writer(self.fd, self._on_writable)

    def _on_writable(self) -> None:
        try:
            self._send_at = perf_counter_ns()
            sent = self._sock.send(self._out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lost(exc)
            return
        del self._out[:sent]
        if not self._out:
            self.loop.remove_writer(self.fd)
            if self._written_on_flush:
                self._stamp_written(self._send_at)
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
            stream.finish(perf_counter_ns())
        elif not self._got_bytes and self.served:
            self.fail(StaleConnection("keep-alive connection closed by the server"))
        elif exc is not None:
            self.fail(httpx.ReadError(f"connection lost: {exc}"))
        else:
            self.fail(httpx.RemoteProtocolError("server closed the connection mid-response"))

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
        stream = self._stream = ArrivalStream(self, self._pool.sweep)
        self._waiter = None
        self._body_to_eof = self._delimited_by_close(status)
        if not waiter.done():
            waiter.set_result((status, self._reason, self._headers, stream))
        if self._head_only:
            # llhttp does not know the request was HEAD and would wait for the body a
            # Content-Length announces; the answer is complete, the connection unusable.
            self._done_exchange()
            stream.finish(self._last_rx)
            self.close()

    def on_body(self, body: bytes) -> None:
        if self._stream is not None:
            self._stream.push(body, self._last_rx)

    def on_message_complete(self) -> None:
        if self._informational:
            self._informational = False
            return
        stream = self._stream
        if stream is None:
            return
        self._done_exchange()
        stream.finish(self._last_rx)
        if self._parser.should_keep_alive() and not self.closed:
            self.served += 1
            self._pool.release(self)
        else:
            self.close()

    # -- used by the transport and the stream --

    def begin(self, head_only: bool, phases: Phases | None = None) -> asyncio.Future[_Head]:
        """Expect the answer to a request about to be written (its ``phases`` get the
        moment it was written)."""
        self._waiter = waiter = self.loop.create_future()
        self._head_only = head_only
        self._got_bytes = False
        self._phases = phases
        self._written_on_flush = False
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
        """The request is written: from now on the server's silence is timed. Its last
        byte went to the kernel in the last send (stamped as that call began), or goes
        when the queued rest is sent."""
        self._last_rx = perf_counter_ns()
        if self._out:
            self._written_on_flush = True
        else:
            self._stamp_written(self._send_at)
        self._read_timeout = read_timeout
        if read_timeout is not None:
            self._timer = self.loop.call_later(read_timeout, self._check_silence)

    def pause(self) -> None:
        """Stop reading the socket (the reader is far behind)."""
        if not self.paused and not self.closed:
            self.paused = True
            self.loop.remove_reader(self.fd)

    def resume(self) -> None:
        """Read the socket again."""
        if self.paused and not self.closed:
            self.paused = False
            self.loop.add_reader(self.fd, self.on_readable)

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
                self.loop.remove_reader(self.fd)
            if self._out:
                self.loop.remove_writer(self.fd)
            self._pool.unwatch(self)  # before close: the descriptor number may be reused
            self._sock.close()
            self._wake_writer()  # a writer waiting in drain() finds the connection closed
        self._pool.forget(self)

    # -- internals --

    def _delimited_by_close(self, status: int) -> bool:
        if self._head_only or status in NO_BODY_STATUS:
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
            self.fail(httpx.ReadTimeout(f"no data from the server for {timeout:g} s"))
        else:
            self._timer = self.loop.call_later(timeout - silent_s, self._check_silence)

    def _stamp_written(self, stamp: int) -> None:
        self._written_on_flush = False
        if self._phases is not None:
            self._phases.request_written = stamp

    def _done_exchange(self) -> None:
        self._waiter = None
        self._stream = None
        self._phases = None
        self._written_on_flush = False
        self.resume()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def fail(self, error: httpx.TransportError) -> None:
        waiter, stream = self._waiter, self._stream
        self._done_exchange()
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
        if stream is not None:
            stream.fail(error)
        self.close()


def _literal_version(host: str) -> int | None:
    """4 or 6 for an IP address, None for a name (which needs a lookup)."""
    try:
        return ipaddress.ip_address(host).version
    except ValueError:
        return None


async def open_socket(
    loop: asyncio.AbstractEventLoop,
    host: str,
    port: int,
    guard: EgressGuard | None = None,
    phases: Phases | None = None,
) -> socket.socket:
    """A connected non-blocking TCP socket to the first address of ``host`` that answers.

    With a ``guard``, the name is resolved once by the guard, every address is checked
    against the egress policy (EgressDenied if one is refused, before any connect) and
    only those exact addresses are connected to: no second lookup can swap them.
    ``phases`` gets the lookup (a name only: an IP address has none) and the connect,
    from the first address tried to the one that answered.
    """
    phases = phases if phases is not None else Phases()  # stamps nobody reads otherwise
    addresses: list[tuple[int, Any]]
    version = _literal_version(host)
    if version is None:
        phases.dns_start = perf_counter_ns()
    if guard is not None:
        addresses = list(await guard.addresses(host, port))
    elif version is not None:  # no lookup (nor thread) for literals
        addresses = [(socket.AF_INET6 if version == 6 else socket.AF_INET, (host, port))]
    else:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addresses = [(family, address) for family, _, _, _, address in infos]
    if version is None:
        phases.dns_end = perf_counter_ns()
    phases.connect_start = perf_counter_ns()
    error: OSError = OSError(f"no address for {host}")
    for family, address in addresses:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if SO_TIMESTAMPNS is not None:
                with contextlib.suppress(OSError):  # without it: stamps at read time
                    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            await _sock_connect(loop, sock, address)
        except OSError as exc:
            sock.close()
            error = exc
        except BaseException:
            sock.close()
            raise
        else:
            phases.connect_end = perf_counter_ns()
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


def request_head(request: httpx.Request) -> bytes:
    lines = [b"%s %s HTTP/1.1\r\n" % (request.method.encode("ascii"), request.url.raw_path)]
    for name, value in request.headers.raw:
        if b"\r" in value or b"\n" in value or b"\r" in name or b"\n" in name:
            raise httpx.LocalProtocolError(f"line break in header {name!r}")
        lines.append(b"%s: %s\r\n" % (name, value))
    lines.append(b"\r\n")
    return b"".join(lines)


async def write_streamed(
    connection: Connection, head: bytes, request: httpx.Request, write_timeout_s: float | None
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
