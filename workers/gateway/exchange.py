"""One forwarded request of the gateway: its answer relayed to the client as it arrives,
its bytes kept for the capture process (``workers/gateway/server.py`` says how the primary
path works).

An :class:`Exchange` is the :class:`~workers.gateway.upstream.Receiver` of the upstream
connection it is sent on: it writes the primary's head and body pieces to its client
(``workers/gateway/connection.py``) at once, falls back to the next target when the primary
failed it before any byte reached the client (``targets.py``, docs/failover.md), and
describes its end to the capture process (``handoff.end``).
"""

from __future__ import annotations

import asyncio
import time
from http import HTTPStatus
from typing import TYPE_CHECKING

import orjson

from workers.gateway.proxy import UsageFilter, is_passed
from workers.gateway.targets import falls_back
from workers.gateway.upstream import UpstreamConnection

if TYPE_CHECKING:
    from workers.gateway.connection import ClientConnection

now = time.perf_counter_ns

# Bytes of one answer kept for the capture (its stamps and text); the client gets all.
MAX_CAPTURED_BYTES = 8 * 1024 * 1024


def reason_phrase(status: int) -> bytes:
    """The reason phrase of an HTTP status (``Unknown`` for one HTTP does not name)."""
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
        parts = [b"HTTP/1.1 %d %s\r\n" % (status, reason_phrase(status))]
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
        # Called once per piece of every answer: the framing of ``frame_piece`` is
        # written out here rather than called.
        if self.handed and self.captured < MAX_CAPTURED_BYTES:
            self.chunks.append((stamp, chunk))
            self.captured += len(chunk)
        out = chunk if self.usage_filter is None else self.usage_filter.feed(chunk)
        if out:
            self.out.append(b"%x\r\n%b\r\n" % (len(out), out) if self.client.chunked else out)

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
            transport = self.client.transport  # None once the client is gone
            if transport is not None:
                transport.write(out[0] if len(out) == 1 else b"".join(out))
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
