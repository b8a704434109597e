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

The request path is in three modules: this one (the gateway: its targets, capture
process, routes and lifecycle), ``connection.py`` (a client connection: parsing,
pipelining, answering in order) and ``exchange.py`` (one forwarded request: relaying,
capturing, falling back).
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
from dataclasses import asdict, dataclass

import orjson

from scenarios.gateway_config import GatewayConfig
from scenarios.limits import MAX_GATEWAY_FALLBACKS
from scenarios.providers.kinds import AnyProvider, OpenAIProvider, SimulatedProvider
from workers.gateway.connection import ClientConnection, Request
from workers.gateway.exchange import Exchange, error_body, now
from workers.gateway.handoff import MAX_BUFFER_BYTES, Handoff, frame
from workers.gateway.proxy import UsageFilter, primary_key, provider_key
from workers.gateway.targets import Target, build_target
from workers.gateway.upstream import UpstreamPool
from workers.runtime.gc_tuning import THRESHOLDS as GC_THRESHOLDS
from workers.simulator.pool import SimulatorPool

MAX_BODY_BYTES = 32 * 1024 * 1024
SWEEP_S = 0.5
CHAT = b"/v1/chat/completions"


@dataclass
class GatewayStats:
    """Counters of the request path (the event loop only)."""

    requests: int = 0
    bad_requests: int = 0
    too_large: int = 0
    upstream_connections: int = 0
    fallbacks: int = 0  # requests re-sent to the next target


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
        # A worker's thresholds: young collections are rarer (every request allocates).
        gc.set_threshold(*GC_THRESHOLDS)
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
