"""The arrival transport's pool: the httpx transport that opens, reuses and sweeps its
connections and checks each against the egress guard (the package docstring explains
why it reads its sockets itself)."""

from __future__ import annotations

import asyncio
import select
import ssl
from time import perf_counter_ns
from typing import Any

import httpx

from scenarios.security.egress import EgressDenied, EgressGuard
from workers.client.transport.arrival import ARRIVAL_EXTENSION, READ_GAPS
from workers.client.transport.connection import (
    Connection,
    Origin,
    StaleConnection,
    Tls,
    open_socket,
    request_head,
    write_streamed,
)
from workers.client.transport.phases import PHASES_EXTENSION, Phases

__all__ = ["ArrivalTransport", "EgressRefused"]

# While the loop is busy (a burst of requests being built, many events being decoded),
# sockets are also read from inside that work at least this often (ArrivalTransport.sweep),
# so writes of one stream seldom wait together long enough for the kernel to merge them.
_SWEEP_NS = 1_000_000


def _origin_of(url: httpx.URL) -> Origin:
    """The pool key of ``url`` (no SNI override: that comes with a request)."""
    scheme = url.raw_scheme
    return (scheme, url.raw_host, url.port or (443 if scheme == b"https" else 80), None)


class EgressRefused(httpx.ConnectError):
    """The egress policy refused the host or an address it resolved to; nothing was sent."""


class ArrivalTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 on sockets read with arrival stamps, for ``httpx.AsyncClient(transport=)``.

    Connections are pooled per origin without a cap and reused most-recent first;
    ``keepalive_expiry`` drops idle ones before a server would: a timer closes every
    connection idle for that long, requests or not (an idle socket costs the worker a
    descriptor and the server a connection), and :meth:`trim` closes at a stage's end
    the idle ones no running stage wants (docs/load.md, "Connections"). Responses carry
    their :class:`ArrivalStream` in ``response.extensions[ARRIVAL_EXTENSION]``.
    """

    def __init__(
        self,
        *,
        verify: ssl.SSLContext | bool = True,
        keepalive_expiry: float | None = 30.0,
        guard: EgressGuard | None = None,
    ) -> None:
        self._verify = verify
        self._guard = guard
        self._ssl: ssl.SSLContext | None = None
        self._keepalive_expiry = keepalive_expiry
        # Idle connections per origin; a dict keeps release order, popitem() is LIFO.
        self._idle: dict[Origin, dict[Connection, None]] = {}
        self._open: set[Connection] = set()
        # Connections the stages running now want open to each origin (pre-warm).
        self._wanted: dict[Origin, int] = {}
        self._opening: dict[Origin, int] = {}  # of those, being opened now
        # Every open socket, watched a second time for sweep(); Linux only (epoll), made
        # with the first connection, on the loop (and in the process) that uses it.
        self._poller: Any = None
        self._watched: dict[int, Connection] = {}
        self._next_sweep = 0
        # The idle timer (keepalive_expiry), armed while any connection is idle.
        self._reaper: asyncio.TimerHandle | None = None

    def sweep(self, *, force: bool = False) -> None:
        """Read every socket with bytes waiting, if no sweep ran for _SWEEP_NS (or ``force``).

        Called from busy code paths (each chunk handed to a reader, each request sent).
        The loop itself reads only between its batches of callbacks; a batch of 256
        streams' work can take tens of ms, during which a stream's next write lands
        on its unread predecessor and the kernel merges the two under the later stamp.
        """
        now = perf_counter_ns()
        if self._poller is None:
            return
        if not force and (now < self._next_sweep or now - READ_GAPS.last < _SWEEP_NS):
            return  # swept lately, or the loop read a socket within the last interval
        READ_GAPS.looked(now)
        for fd, _ in self._poller.poll(0):
            connection = self._watched.get(fd)
            if connection is not None and not connection.paused:
                connection.on_readable()
        # A client that cannot keep up finds bytes waiting on every socket at every
        # sweep: then a sweep is as long as its pause before the next one, so sweeps
        # take at most half the time and the tasks that send requests still run (a
        # sweep per task step starved them: 2 s from an answer's head to its reader
        # at 1,000 streams on a busy machine).
        end = perf_counter_ns()
        self._next_sweep = end + max(_SWEEP_NS, end - now)

    def watch(self, connection: Connection) -> None:
        """Include a new connection's socket in sweeps."""
        if self._poller is None and hasattr(select, "epoll"):
            self._poller = select.epoll()
        if self._poller is not None:
            self._poller.register(connection.fd, select.EPOLLIN)
            self._watched[connection.fd] = connection

    def unwatch(self, connection: Connection) -> None:
        """Leave a closing connection's socket out of sweeps."""
        if self._watched.pop(connection.fd, None) is not None and self._poller is not None:
            self._poller.unregister(connection.fd)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request``, return as soon as the response head arrived."""
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        url = request.url
        scheme = url.raw_scheme
        if scheme not in (b"http", b"https"):
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {url.scheme!r}")
        port = url.port or (443 if scheme == b"https" else 80)
        origin: Origin = (scheme, url.raw_host, port, request.extensions.get("sni_hostname"))
        head = request_head(request)
        try:
            body: bytes | None = request.content
        except httpx.RequestNotRead:
            body = None  # a streamed body: written piece by piece
        phases = request.extensions.get(PHASES_EXTENSION)
        if not isinstance(phases, Phases):
            phases = None
        connection = self._idle_connection(origin)
        if connection is not None:
            if phases is not None:
                phases.connection_new = False
            if body is None:  # a streamed body cannot be sent twice: no second chance
                return await self._exchange(connection, request, head, body, timeouts, phases)
            try:
                return await self._exchange(connection, request, head, body, timeouts, phases)
            except StaleConnection:
                pass  # the server closed it while idle and saw nothing: send again
        if phases is not None:
            phases.connection_new = True
        connection = await self._connect(origin, timeouts.get("connect"), phases)
        return await self._exchange(connection, request, head, body, timeouts, phases)

    async def _exchange(
        self,
        connection: Connection,
        request: httpx.Request,
        head: bytes,
        body: bytes | None,
        timeouts: dict[str, float | None],
        phases: Phases | None,
    ) -> httpx.Response:
        answer = connection.begin(request.method == "HEAD", phases)
        try:
            if body is not None:
                connection.write(head + body)  # one write: one segment for small requests
            else:
                await write_streamed(connection, head, request, timeouts.get("write"))
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

    def want(self, url: httpx.URL, count: int) -> int:
        """Register ``count`` more connections wanted at once to ``url``'s origin (a
        stage about to start); returns how many to open so that the open ones, idle or
        busy, cover everything wanted by the stages registered now. ``count`` < 0 ends
        a registration."""
        origin = _origin_of(url)
        wanted = self._wanted.get(origin, 0) + count
        if wanted > 0:
            self._wanted[origin] = wanted
        else:
            self._wanted.pop(origin, None)
        if count <= 0:
            return 0
        opened = sum(1 for c in self._open if c.origin == origin and not c.closed)
        missing = max(0, wanted - opened - self._opening.get(origin, 0))
        # Reserved until opened (or given up), so that a stage registering meanwhile
        # does not open them a second time.
        self._opening[origin] = self._opening.get(origin, 0) + missing
        return missing

    def opened_or_given_up(self, url: httpx.URL, count: int = 1) -> None:
        """``count`` connections reserved by :meth:`want` were opened or will not be."""
        origin = _origin_of(url)
        left = self._opening.get(origin, 0) - count
        if left > 0:
            self._opening[origin] = left
        else:
            self._opening.pop(origin, None)

    async def open_idle(self, url: httpx.URL, connect_timeout_s: float | None) -> None:
        """Open one connection to ``url``'s origin and leave it idle in the pool (a
        pre-warm: nothing is sent). Raises as a request's connect would."""
        try:
            connection = await self._connect(_origin_of(url), connect_timeout_s)
        finally:
            self.opened_or_given_up(url)
        self.release(connection)

    def _idle_connection(self, origin: Origin) -> Connection | None:
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

    async def _connect(
        self, origin: Origin, connect_timeout_s: float | None, phases: Phases | None = None
    ) -> Connection:
        """A new connection to ``origin``; ``phases`` gets its DNS, connect and TLS."""
        scheme, host, port, server_name = origin
        loop = asyncio.get_running_loop()
        hostname = host.decode("ascii")
        try:
            async with asyncio.timeout(connect_timeout_s):
                sock = await open_socket(loop, hostname, port, self._guard, phases)
                try:
                    tls = None
                    if scheme == b"https":
                        tls = Tls(self._ssl_context(), server_name or hostname)
                        if phases is not None:
                            phases.tls_start = perf_counter_ns()
                        await tls.handshake(loop, sock)
                        if phases is not None:
                            phases.tls_end = perf_counter_ns()
                except BaseException:
                    sock.close()
                    raise
        except EgressDenied as exc:
            raise EgressRefused(f"egress refused for {hostname}:{port}: {exc}") from None
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connect to {hostname}:{port} timed out") from None
        except OSError as exc:  # refused, unreachable, DNS (gaierror), TLS (SSLError)
            raise httpx.ConnectError(f"connect to {hostname}:{port}: {exc}") from exc
        connection = Connection(self, origin, sock, tls)
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

    def release(self, connection: Connection) -> None:
        """A connection finished an exchange and may serve the next one."""
        connection.idle_since = connection.loop.time()
        self._idle.setdefault(connection.origin, {})[connection] = None
        if self._reaper is None and self._keepalive_expiry is not None:
            self._reaper = connection.loop.call_later(self._keepalive_expiry, self._reap)

    @property
    def open_connections(self) -> int:
        """Connections open now, idle or busy (each holds a descriptor)."""
        return len(self._open)

    def idle_count(self, url: httpx.URL) -> int:
        """Idle connections to ``url``'s origin."""
        return sum(1 for c in self._idle.get(_origin_of(url), {}) if not c.closed)

    def trim(self, url: httpx.URL) -> int:
        """Close the idle connections to ``url``'s origin beyond what the stages still
        registered (:meth:`want`) can use: their wanted count less the connections they
        have busy. Called when a stage ends, so that the connections it opened do not
        outlive it while another stage on the same origin keeps its own. Oldest first;
        returns how many were closed."""
        origin = _origin_of(url)
        idle = self._idle.get(origin)
        if not idle:
            return 0
        busy = sum(1 for c in self._open if c.origin == origin and c.busy and not c.closed)
        keep = max(0, self._wanted.get(origin, 0) - busy)
        surplus = [c for c in idle if not c.closed][: max(0, len(idle) - keep)]
        for connection in surplus:  # the dict is in release order: oldest first
            connection.close()
        return len(surplus)

    def _reap(self) -> None:
        """The idle timer: close connections idle for keepalive_expiry, re-arm while
        any stay idle."""
        self._reaper = None
        expiry = self._keepalive_expiry
        if expiry is None:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        next_due: float | None = None
        for idle in list(self._idle.values()):
            for connection in list(idle):  # release order: the oldest first
                if connection.closed:
                    idle.pop(connection, None)
                elif now - connection.idle_since >= expiry:
                    connection.close()
                else:
                    due = connection.idle_since + expiry
                    next_due = due if next_due is None else min(next_due, due)
                    break
        if next_due is not None:
            self._reaper = loop.call_at(next_due, self._reap)

    def forget(self, connection: Connection) -> None:
        """A connection closed: drop it from the pool."""
        self._open.discard(connection)
        idle = self._idle.get(connection.origin)
        if idle is not None:
            idle.pop(connection, None)

    async def aclose(self) -> None:
        """Close every connection; bodies still arriving end with a ReadError."""
        for connection in list(self._open):
            if connection.busy:
                connection.fail(httpx.ReadError("transport closed"))
            connection.close()
        self._idle.clear()
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        if self._poller is not None:
            self._poller.close()
            self._poller = None
