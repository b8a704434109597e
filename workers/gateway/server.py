"""The gateway's primary path: an OpenAI-compatible reverse proxy as light as nginx.

A raw asyncio ``Protocol`` server on uvloop, HTTP/1.1 parsed by httptools - no ASGI
framework and no HTTP client library on the path a live request takes (decision in
docs/decisions.md). Per request: the body is read (at most ``MAX_BODY_BYTES``: 413
beyond) and checked to be a chat request; it is written to a pooled keep-alive
connection to the primary in one piece, then described to the capture process
(``handoff.begin``: no waiting, dropped and counted when the hand-off is full); the
answer's bytes are written to the client as they arrive (chunked, unbuffered), each
piece stamped on arrival and kept for the capture; at the end, ``handoff.end``. The
sampling decision, the shadow task, the stream's interpretation into TTFT/ITL, the
record and its publishing all happen in the capture process
(``workers/gateway/capture.py``), on another core.

With ``fallbacks``, a chat request the primary fails before any byte reached the
client (unreachable, connection closed, silent past its stall timeout, 429 or 5xx) is
re-sent to the next fallback (``targets.py``, docs/failover.md); the failed answer's
body is read and dropped, so its connection stays in the pool.

Routes: ``POST /v1/chat/completions`` (streaming and not), ``GET /v1/models`` (the
primary's list), ``GET /gateway/stats`` (counters; the capture process's under
``capture``, ``shadow`` and ``sink``) and ``GET /gateway/health``.

``intended_start`` of a record is when the gateway had the whole request, ``sent`` when
it began sending upstream (connecting included): their difference (the record's
schedule lag) is the gateway's own time before forwarding.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import os
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from http import HTTPStatus
from typing import cast

import httptools
import orjson

from scenarios.gateway_config import GatewayConfig
from scenarios.limits import MAX_GATEWAY_FALLBACKS
from scenarios.providers import AnyProvider, OpenAIProvider, SimulatedProvider
from workers.gateway.handoff import MAX_BUFFER_BYTES, Handoff, frame
from workers.gateway.proxy import UsageFilter, is_passed, primary_key, provider_key
from workers.gateway.targets import Target, build_target, falls_back
from workers.gateway.upstream import UpstreamConnection, UpstreamPool
from workers.simulator.pool import SimulatorPool

now = time.perf_counter_ns

MAX_BODY_BYTES = 32 * 1024 * 1024
MAX_HEAD_BYTES = 64 * 1024
# Bytes of one answer kept for the capture (its stamps and text); the client gets all.
MAX_CAPTURED_BYTES = 8 * 1024 * 1024
MAX_PIPELINED = 32
SWEEP_S = 0.5
LINGER_S = 2.0
CHAT = b"/v1/chat/completions"


@dataclass
class GatewayStats:
    """Counters of the request path (the event loop only)."""

    requests: int = 0
    bad_requests: int = 0
    too_large: int = 0
    upstream_connections: int = 0
    fallbacks: int = 0  # requests re-sent to the next target


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


def _reason(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode()
    except ValueError:
        return b"Unknown"


def error_body(status: int, message: str, kind: str = "invalid_request_error") -> bytes:
    """An OpenAI-style error object."""
    return orjson.dumps({"error": {"message": message, "type": kind, "code": status}})


class Exchange:
    """One forwarded request: its answer relayed to the client, its bytes kept for the
    capture (the :class:`~workers.gateway.upstream.Receiver` of its upstream connection)."""

    __slots__ = (
        "captured",
        "chunks",
        "client",
        "content",
        "finished",
        "handed",
        "headers",
        "key",
        "out",
        "paused",
        "request",
        "retried",
        "sent",
        "status",
        "stream",
        "target",
        "upstream",
        "usage_filter",
    )

    def __init__(
        self,
        client: ClientConnection,
        request: bytes,
        key: str | None,
        handed: bool,
        stream: bool,
        usage_filter: UsageFilter | None,
    ) -> None:
        self.client = client
        self.request = request
        self.key = key
        self.handed = handed
        self.stream = stream
        self.usage_filter = usage_filter
        self.upstream: UpstreamConnection | None = None
        self.status: int | None = None
        self.chunks: list[tuple[int, bytes]] = []
        self.out: list[bytes] = []
        self.captured = 0
        self.sent = 0
        self.retried = self.paused = self.finished = False
        # A chat request keeps its body and headers for a fallback: the next target's
        # request is composed from them (None: no fallback, e.g. GET /v1/models).
        self.content: bytes | None = None
        self.headers: dict[bytes, bytes] = {}
        self.target = 0

    # ------------------------------------------------------------ sending

    def start(self) -> None:
        """Send on an idle pooled connection, else on a new one."""
        gateway = self.client.gateway
        gateway.active.add(self)
        self.sent = now()
        self._dispatch()

    def _dispatch(self) -> None:
        connection = self.client.gateway.targets[self.target].pool.take()
        if connection is None:
            asyncio.get_running_loop().create_task(self._connect())
        else:
            self._send(connection)

    def _can_fall_back(self) -> bool:
        # Nothing has been written to the client while status is None.
        return (
            self.content is not None
            and self.status is None
            and not self.finished
            and self.target + 1 < len(self.client.gateway.targets)
        )

    def fall_back(self) -> None:
        """Re-send the request to the next target (the one before failed it)."""
        gateway = self.client.gateway
        gateway.stats.fallbacks += 1
        self.target += 1
        self.upstream = None
        self.retried = False
        assert self.content is not None
        self.request = gateway.targets[self.target].chat_request(
            self.content, self.headers, self.stream
        )
        self._dispatch()

    def _send(self, connection: UpstreamConnection) -> None:
        self.upstream = connection
        connection.send(self.request, self)

    async def _connect(self) -> None:
        pool = self.client.gateway.targets[self.target].pool
        try:
            connection = await pool.connect()
        except (OSError, TimeoutError) as exc:
            if self._can_fall_back():
                self.fall_back()
                return
            self._unreachable("connect", _describe(exc) or "connection timed out")
            return
        self.client.gateway.stats.upstream_connections += 1
        if self.finished:  # the client left while we connected: keep it for the next one
            pool.give_back(connection)
            return
        self._send(connection)

    # ------------------------------------------------------------ Receiver

    def on_head(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        """Answer the client with the primary's status and passed headers."""
        if status != 200:
            if falls_back(status) and self._can_fall_back() and self.upstream is not None:
                # Its body is read and dropped; the next target is asked at its end.
                self.upstream.receiver = _Discard(self)
                return
            self.usage_filter = None  # an error body passes unchanged
        self.status = status
        parts = [b"HTTP/1.1 %d %s\r\n" % (status, _reason(status))]
        parts += [b"%s: %s\r\n" % (n, v) for n, v in headers if is_passed(n.decode("latin-1"))]
        if self.key is not None:
            parts.append(b"x-tokenbench-request-key: %s\r\n" % self.key.encode())
        if self.stream and status == 200:
            parts.append(b"cache-control: no-cache\r\n")
        if self.client.chunked:
            parts.append(b"transfer-encoding: chunked\r\n")
        if not self.client.keep_alive:
            parts.append(b"connection: close\r\n")
        parts.append(b"\r\n")
        self.out.append(b"".join(parts))

    def on_body(self, chunk: bytes, stamp: int) -> None:
        """Pass the piece on at once (chunked), after keeping it for the capture."""
        if self.handed and self.captured < MAX_CAPTURED_BYTES:
            self.chunks.append((stamp, chunk))
            self.captured += len(chunk)
        out = chunk if self.usage_filter is None else self.usage_filter.feed(chunk)
        if out:
            self.out.append(self.client.frame_piece(out))

    def on_end(self) -> None:
        """The answer is complete: close the chunked body, hand the capture over."""
        if self.usage_filter is not None and (rest := self.usage_filter.flush()):
            self.out.append(self.client.frame_piece(rest))
        if self.client.chunked:
            self.out.append(b"0\r\n\r\n")
        self.flush()
        self._finish(None)
        self.client.done()

    def flush(self) -> None:
        """Write what this read of the primary produced, in one write (one syscall)."""
        out = self.out
        if out:
            self.client.write(out[0] if len(out) == 1 else b"".join(out))
            out.clear()

    def on_lost(self, reason: str, got_head: bool) -> None:
        """The primary's connection ended early: retry once, answer 502, or cut off."""
        upstream = self.upstream
        if not got_head and upstream is not None and upstream.reused and not self.retried:
            # A kept-alive connection the primary had closed just as we wrote on it.
            self.retried = True
            self.upstream = None
            asyncio.get_running_loop().create_task(self._connect())
            return
        if not got_head:
            if self._can_fall_back():
                self.fall_back()
                return
            self._unreachable("protocol", reason)
            return
        self._finish(("protocol", reason))
        self.flush()
        self.client.abort()  # the client sees an incomplete body, as the gateway did

    # ------------------------------------------------------------ endings

    def _unreachable(self, kind: str, reason: str) -> None:
        if self.finished:
            return
        self._finish((kind, reason))
        message = f"primary unreachable: {reason}"
        self.client.respond(502, error_body(502, message, "upstream_error"), self.key)

    def timed_out(self, silent_s: float) -> None:
        """No byte from the primary for the provider's stall timeout."""
        if self.upstream is not None:
            self.upstream.abandon()
        reason = f"no byte from the primary for {silent_s:g} s"
        if self._can_fall_back():
            self.fall_back()
        elif self.status is None:
            self._unreachable("timeout", reason)
        else:
            self._finish(("timeout", reason))
            self.client.abort()

    def cancel(self) -> None:
        """The client went away mid-answer."""
        if self.upstream is not None:
            self.upstream.abandon()
        self._finish(("cancelled", "client went away mid-response"))

    def _finish(self, error: tuple[str, str] | None) -> None:
        if self.finished:
            return
        self.finished = True
        gateway = self.client.gateway
        gateway.active.discard(self)
        if self.handed:
            headers = [] if self.status == 200 else self._kept_headers()
            gateway.handoff.end(
                ("end", self.key, self.sent, self.status, headers, self.chunks, now(), error,
                 self.stream)
            )  # fmt: skip

    def _kept_headers(self) -> list[tuple[str, str]]:
        # An error answer's Retry-After is part of its classification.
        upstream = self.upstream
        if upstream is None:
            return []
        return [
            (n.decode("latin-1"), v.decode("latin-1"))
            for n, v in upstream.headers
            if is_passed(n.decode("latin-1"))
        ]

    # ------------------------------------------------------------ flow control

    def pause(self) -> None:
        """The client's buffer is full: stop reading the primary."""
        self.paused = True
        if self.upstream is not None:
            self.upstream.pause_reading()

    def resume(self) -> None:
        """The client caught up."""
        self.paused = False
        if self.upstream is not None:
            self.upstream.resume_reading()


class _Discard:
    """Reads and drops the answer of a target that failed a request before any byte
    reached the client (its connection goes back to the pool at the end), then asks the
    next target."""

    __slots__ = ("exchange",)

    def __init__(self, exchange: Exchange) -> None:
        self.exchange = exchange

    def on_head(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        """Not called: the head was the exchange's."""

    def on_body(self, chunk: bytes, stamp: int) -> None:
        """Dropped."""

    def on_end(self) -> None:
        """The failed answer is read: the next target."""
        if not self.exchange.finished:
            self.exchange.fall_back()

    def flush(self) -> None:
        """Nothing to write."""

    def on_lost(self, reason: str, got_head: bool) -> None:
        """The failed answer's connection closed: the next target all the same."""
        self.on_end()


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


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
            % (status, _reason(status), content_type, len(body), extra, close, body)
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


class Gateway:
    """The state one gateway process serves requests with."""

    def __init__(
        self,
        config: GatewayConfig,
        run_id: str,
        instance: str,
        redis_url: str,
        handoff_bytes: int = MAX_BUFFER_BYTES,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        self.config = config
        self.run_id = run_id
        self.instance = instance
        self.redis_url = redis_url
        self.handoff_bytes = handoff_bytes
        self.max_body_bytes = max_body_bytes
        self.stats = GatewayStats()
        self.seq = itertools.count()
        kind, _, name = (config.sample_by or "").partition(":")
        self.sample_header = name.lower().encode() if kind == "header" else None
        self.active: set[Exchange] = set()
        self.clients: set[ClientConnection] = set()
        self.stopping = False
        self._simulators: SimulatorPool | None = None
        self._capture: subprocess.Popen[bytes] | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._handoff: Handoff | None = None
        # The primary, then its fallbacks (targets.py).
        self.targets: list[Target] = []

    @property
    def pool(self) -> UpstreamPool:
        """Connections to the primary."""
        assert self.targets, "gateway not started"
        return self.targets[0].pool

    @property
    def capture_pid(self) -> int | None:
        """The capture process's id (None before start)."""
        return None if self._capture is None else self._capture.pid

    @property
    def handoff(self) -> Handoff:
        """The capture process's socket."""
        assert self._handoff is not None, "gateway not started"
        return self._handoff

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Find the primary, start the capture process, prepare request heads."""
        primary = self.config.primary
        salt_env = self.config.privacy.hash_salt_env
        from workers.client.secrets import is_reserved  # noqa: PLC0415

        if salt_env and is_reserved(salt_env):
            raise RuntimeError(
                f"privacy.hash_salt_env: {salt_env} is a tokenbench setting, not a salt"
            )
        key = primary_key(self.config)
        fallback_keys = [provider_key(f) for f in self.config.fallbacks]
        # Started first: its imports overlap with the rest of the start-up.
        await self._start_capture()
        self.targets = [build_target(primary, await self._base_url(primary), key, False)]
        for fallback, fallback_key in zip(self.config.fallbacks, fallback_keys, strict=True):
            base_url = await self._base_url(fallback)
            self.targets.append(build_target(fallback, base_url, fallback_key, True))
        # Answered once the spec is applied (imports, Redis, the sender thread): healthy
        # only from then on, so no early request's capture waits behind a cold start.
        if not await self.handoff.query(timeout_s=120):
            raise RuntimeError("the gateway's capture process did not start")
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep())

    async def _base_url(self, provider: AnyProvider) -> str:
        """Where ``provider`` is served: its base URL, or a simulated endpoint started
        for it."""
        if isinstance(provider, SimulatedProvider):
            if self._simulators is None:
                # A gateway's targets live as long as it does: no idle stop, and room
                # for its primary and every fallback.
                self._simulators = SimulatorPool(
                    idle_s=None, max_processes=MAX_GATEWAY_FALLBACKS + 1
                )
            return await self._simulators.base_url(provider)
        assert isinstance(provider, OpenAIProvider)  # PRIMARY_KINDS
        return provider.base_url

    async def _start_capture(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = {**os.environ, "TOKENBENCH__REDIS__URL": self.redis_url}
        # subprocess rather than the loop's: uvloop's process spawning does not pass fds.
        self._capture = await asyncio.to_thread(
            subprocess.Popen,
            [sys.executable, "-m", "workers.gateway.capture", "--fd", str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            env=env,
            stdin=subprocess.DEVNULL,
        )
        theirs.close()
        loop = asyncio.get_running_loop()
        _, self._handoff = await loop.create_unix_connection(
            lambda: Handoff(self.handoff_bytes), sock=ours
        )
        spec = {
            "config": self.config.model_dump(mode="json"),
            "run_id": self.run_id,
            "instance": self.instance,
            "redis_url": self.redis_url,
        }
        assert self._handoff.transport is not None
        self._handoff.transport.write(frame(("spec", orjson.dumps(spec))))

    async def listen(self, host: str, port: int) -> asyncio.Server:
        """Accept clients on ``host:port``."""
        loop = asyncio.get_running_loop()
        return await loop.create_server(lambda: ClientConnection(self), host, port, backlog=1024)

    async def stop(self, grace_s: float = 10.0) -> None:
        """Let answers in flight end (up to ``grace_s``), then flush the capture process."""
        self.stopping = True
        deadline = time.monotonic() + grace_s
        while self.active and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        for client in list(self.clients):
            if client.transport is not None:
                client.transport.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self._handoff is not None:
            await self._handoff.close(30.0)
        if self._capture is not None:
            try:
                await asyncio.to_thread(self._capture.wait, 10)
            except subprocess.TimeoutExpired:
                self._capture.kill()
                await asyncio.to_thread(self._capture.wait)
        for target in self.targets:
            target.pool.close()
        if self._simulators is not None:
            await self._simulators.close()

    async def _sweep(self) -> None:
        """Time out silent primaries and idle clients (one timer for all, not one each)."""
        idle_ns = int(75e9)
        while True:
            await asyncio.sleep(SWEEP_S)
            moment = now()
            for exchange in list(self.active):
                upstream = exchange.upstream
                if upstream is None or exchange.paused:
                    continue
                stall_s = self.targets[exchange.target].stall_s
                if moment - upstream.last_activity > stall_s * 1e9:
                    exchange.timed_out(stall_s)
            for client in list(self.clients):
                if not client.busy and moment - client.idle_since > idle_ns:
                    client.abort()

    # ------------------------------------------------------------ routes

    def route(self, client: ClientConnection, request: Request) -> None:
        """Dispatch one request."""
        path, method = request.path, request.method
        if path == CHAT:
            if method != b"POST":
                client.respond(405, error_body(405, "use POST"))
            else:
                self.chat(client, request)
        elif path == b"/v1/models" and method == b"GET":
            self.models(client, request)
        elif path == b"/gateway/health":
            body = orjson.dumps({"status": "ok", "session": self.run_id})
            client.respond(200, body)
        elif path == b"/gateway/stats":
            asyncio.get_running_loop().create_task(self._stats(client))
        else:
            client.respond(404, error_body(404, "not found", "not_found"))

    def chat(self, client: ClientConnection, request: Request) -> None:
        """``POST /v1/chat/completions``: forward at once, describe it to the capture."""
        raw = request.body
        try:
            body = orjson.loads(raw)
            messages = body["messages"]
            if not isinstance(messages, list) or not messages:
                raise TypeError
        except (orjson.JSONDecodeError, KeyError, TypeError, IndexError):
            self.stats.bad_requests += 1
            client.respond(400, error_body(400, "body must be a JSON object with a messages list"))
            return
        self.stats.requests += 1
        seq, key = next(self.seq), os.urandom(16).hex()
        stream = body.get("stream") is True
        options = body.get("stream_options")
        wants_usage = isinstance(options, dict) and options.get("include_usage") is True
        inject = stream and self.config.inject_usage and not wants_usage
        content = raw
        if inject:
            content = orjson.dumps(
                {**body, "stream_options": {**(options or {}), "include_usage": True}}
            )
        sample_value = None
        if self.sample_header is not None and self.sample_header in request.headers:
            sample_value = request.headers[self.sample_header].decode("latin-1")
        primary = self.targets[0]
        upstream_request = primary.chat_request(content, request.headers, stream)
        exchange = Exchange(
            client, upstream_request, key, False, stream, UsageFilter() if inject else None
        )
        if len(self.targets) > 1:  # kept for a fallback
            exchange.content, exchange.headers = content, request.headers
        client.exchange = exchange
        exchange.start()
        # Described to the capture once the request is on its way to the primary (no
        # answer byte can arrive before this returns to the event loop).
        exchange.handed = self.handoff.begin(key, seq, request.received, raw, sample_value)

    def models(self, client: ClientConnection, request: Request) -> None:
        """``GET /v1/models``: the primary's answer, passed through (not captured)."""
        primary = self.targets[0]
        upstream_request = b"%s%s\r\n" % (
            primary.heads["models"],
            primary.auth_line(request.headers),
        )
        exchange = Exchange(client, upstream_request, None, False, False, None)
        client.exchange = exchange
        exchange.start()

    async def _stats(self, client: ClientConnection) -> None:
        captured = await self.handoff.query()
        body = orjson.dumps(
            {
                "session": self.run_id,
                "instance": self.instance,
                **asdict(self.stats),
                "sampled": captured.get("sampled", 0),
                "primary_errors": captured.get("primary_errors", 0),
                "shadow": captured.get("shadow", {}),
                "sink": captured.get("sink", {}),
                "capture": {
                    **self.handoff.snapshot(),
                    **{
                        name: captured.get(name, 0)
                        for name in ("captured", "orphaned", "pending", "unmatched_ends")
                    },
                },
            }
        )
        if client.transport is not None:
            client.respond(200, body)


async def serve(gateway: Gateway, host: str, port: int) -> None:
    """Serve ``gateway`` on ``host:port`` until SIGINT or SIGTERM, then stop it cleanly."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await gateway.start()
        server = await gateway.listen(host, port)
        gc.collect()
        gc.freeze()  # start-up objects are never scanned again: shorter GC pauses
        await stop.wait()
        server.close()
    finally:
        with contextlib.suppress(Exception):
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
        await gateway.stop()


def run(gateway: Gateway, host: str, port: int) -> None:
    """:func:`serve` on a uvloop event loop (the ``tokenbench gateway`` command)."""
    from workers.runtime.event_loop import new_loop  # noqa: PLC0415

    with asyncio.Runner(loop_factory=new_loop) as runner:
        runner.run(serve(gateway, host, port))
