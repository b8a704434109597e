"""A minimal, fast OpenAI-compatible SSE endpoint with known timing, for load tests and
the client benchmarks; optionally it freezes once (a 2 s stall) to expose coordinated
omission.

Every byte it sends is pre-encoded; token events of all streams are driven by one
timer armed for the earliest due event (a heap), not a timer per stream, so thousands
of streams cost the server little CPU and the client stays the thing measured. Each
event's deadline is absolute (request arrival + ``ttft`` + i × ``itl``); how late the
server actually wrote it is kept and served at ``GET /stats`` (p50/p99/max, then reset),
so a benchmark can tell the server's lateness from the client's error. ``GET /requests``
serves each request's own stamps, keyed by :func:`prompt_key` of its last message: when
the request was parsed and when its first token was written (``perf_counter_ns``), and
their difference, the server's TTFT, against which a client's TTFT error is measured
end to end (benchmarks/end_to_end_accuracy.py).

``stall_after=N, stall_s=S``: when request N arrives, nothing is written for S seconds
(events due meanwhile go out when the stall ends), once.

Run it in its own process so its timers never share a GIL with the client:
``python -m tests.fakes.sse_server --port 0 --ttft-ms 50 --itl-ms 20`` prints
``SSE_SERVER_READY port=N``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import heapq
import time
from typing import cast

import orjson

READY_PREFIX = "SSE_SERVER_READY port="
# Requests whose stamps are kept for GET /requests (a load test sends far fewer).
MAX_LOGGED = 1_000_000


def prompt_key(prompt: str) -> str:
    """The key of a request in ``GET /requests``: a hash of its last message's text."""
    return hashlib.blake2b(prompt.encode(), digest_size=8).hexdigest()


_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _event(payload: dict[str, object]) -> bytes:
    return _chunk(b"data: " + orjson.dumps(payload) + b"\n\n")


_BASE = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": "fake"}
ROLE = _event({**_BASE, "choices": [{"index": 0, "delta": {"role": "assistant"}}]})
TOKEN = _event({**_BASE, "choices": [{"index": 0, "delta": {"content": " tok"}}]})


def _tail(prompt_tokens: int, tokens: int) -> bytes:
    finish = {"index": 0, "delta": {}, "finish_reason": "length"}
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": tokens,
        "total_tokens": prompt_tokens + tokens,
    }
    return (
        _event({**_BASE, "choices": [finish]})
        + _event({**_BASE, "choices": [], "usage": usage})
        + _chunk(b"data: [DONE]\n\n")
        + b"0\r\n\r\n"
    )


def _simple(status: bytes, body: bytes) -> bytes:
    return (
        b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n" % len(body) + body
    )


class _Stream:
    __slots__ = ("key", "left", "prompt_tokens", "start", "tokens", "transport")

    def __init__(
        self, transport: asyncio.Transport, start: int, tokens: int, prompt_tokens: int, key: str
    ) -> None:
        self.transport = transport
        self.start = start
        self.tokens = tokens
        self.left = tokens
        self.prompt_tokens = prompt_tokens
        self.key = key


class SSEServer:
    """Shared state of all connections: the event heap and the lateness record."""

    def __init__(
        self,
        ttft_ms: float,
        itl_ms: float,
        max_tokens: int | None = None,
        stall_after: int | None = None,
        stall_s: float = 0.0,
    ) -> None:
        self.ttft_ns = round(ttft_ms * 1e6)
        self.itl_ns = round(itl_ms * 1e6)
        self.max_tokens = max_tokens
        self.stall_after = stall_after
        self.stall_ns = round(stall_s * 1e9)
        self.stall_until = 0
        self.requests = 0
        self.lateness_ns: list[int] = []
        # prompt key -> (request parsed, first token written), perf_counter_ns
        self.sends: dict[str, tuple[int, int]] = {}
        self._heap: list[tuple[int, int, _Stream]] = []
        self._order = 0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due = 0

    def start_stream(self, transport: asyncio.Transport, body: bytes) -> None:
        """Answer one chat request: role chunk now, tokens on their deadlines."""
        now = time.perf_counter_ns()
        self.requests += 1
        if self.stall_after is not None and self.requests == self.stall_after:
            self.stall_until = now + self.stall_ns
        try:
            request = orjson.loads(body)
            tokens = int(request.get("max_tokens") or 16)
            prompt = request["messages"][-1]["content"]
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, IndexError):
            transport.write(_simple(b"400 Bad Request", b'{"error":{"message":"bad"}}'))
            return
        if self.max_tokens is not None:
            tokens = min(tokens, self.max_tokens)
        key = prompt_key(str(prompt))
        stream = _Stream(transport, now, max(tokens, 1), len(str(prompt).split()), key)
        transport.write(_HEAD + ROLE)
        self._push(now + self.ttft_ns, stream)

    def _push(self, due: int, stream: _Stream) -> None:
        self._order += 1
        heapq.heappush(self._heap, (due, self._order, stream))
        if self._timer is None or due < self._timer_due:
            self._arm()

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._heap:
            return
        due = max(self._heap[0][0], self.stall_until)
        self._timer_due = due
        delay = max(0.0, (due - time.perf_counter_ns()) / 1e9)
        self._timer = asyncio.get_running_loop().call_later(delay, self._fire)

    def _fire(self) -> None:
        self._timer = None
        now = time.perf_counter_ns()
        heap = self._heap
        # Timers may fire up to a millisecond early: only what is due is written.
        while heap and heap[0][0] <= now and now >= self.stall_until:
            due, _, stream = heapq.heappop(heap)
            if stream.transport.is_closing():
                continue
            if due >= self.stall_until:  # events held by a stall are late on purpose
                self.lateness_ns.append(now - due)
            if stream.left == stream.tokens and len(self.sends) < MAX_LOGGED:
                # Stamped at its own write: one firing writes many streams' events.
                self.sends[stream.key] = (stream.start, time.perf_counter_ns())
            stream.left -= 1
            if stream.left == 0:
                stream.transport.write(TOKEN + _tail(stream.prompt_tokens, stream.tokens))
            else:
                stream.transport.write(TOKEN)
                heapq.heappush(heap, (due + self.itl_ns, self._order, stream))
                self._order += 1
        self._arm()

    def request_stamps(self) -> bytes:
        """Each request's stamps by prompt key (ns): parsed, first token written, and
        the server's TTFT between the two."""
        # perf_counter_ns is the machine's monotonic clock; the wall-clock instants let a
        # benchmark on the same machine split the error into the request's way here and
        # the first token's way back (against the records' sent_at / first_token_at).
        offset = time.time_ns() - time.perf_counter_ns()
        return orjson.dumps(
            {
                key: {
                    "arrived_ns": arrived,
                    "first_token_ns": first,
                    "ttft_ns": first - arrived,
                    "arrived_at_ns": arrived + offset,
                    "first_token_at_ns": first + offset,
                }
                for key, (arrived, first) in self.sends.items()
            }
        )

    def stats(self) -> bytes:
        """Lateness of written events since the last call, in ms; then reset."""
        values = sorted(self.lateness_ns)
        self.lateness_ns = []

        def q(p: float) -> float:
            return values[min(len(values) - 1, int(p * len(values)))] / 1e6 if values else 0.0

        return orjson.dumps(
            {"events": len(values), "p50_ms": q(0.5), "p99_ms": q(0.99), "max_ms": q(1.0)}
        )


class _Connection(asyncio.Protocol):
    """HTTP/1.1 keep-alive, one request at a time, bodies by content-length."""

    def __init__(self, server: SSEServer) -> None:
        self.server = server
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].decode("latin-1")
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4 : end + 4 + length]
            self.buffer = self.buffer[end + 4 + length :]
            self._handle(head.split(" ", 2), body)

    def _handle(self, request_line: list[str], body: bytes) -> None:
        assert self.transport is not None
        method, path = request_line[0], request_line[1] if len(request_line) > 1 else ""
        if method == "POST" and path.endswith("/chat/completions"):
            self.server.start_stream(self.transport, body)
        elif path.endswith("/requests"):
            self.transport.write(_simple(b"200 OK", self.server.request_stamps()))
        elif path.endswith("/stats"):
            self.transport.write(_simple(b"200 OK", self.server.stats()))
        elif path.endswith("/health"):
            self.transport.write(_simple(b"200 OK", b'{"status":"ok"}'))
        else:
            self.transport.write(_simple(b"404 Not Found", b'{"error":{"message":"nf"}}'))


async def serve(server: SSEServer, port: int = 0) -> None:
    """Serve on 127.0.0.1 until cancelled; prints the ready line."""
    loop = asyncio.get_running_loop()
    listener = await loop.create_server(
        lambda: _Connection(server), "127.0.0.1", port, backlog=4096
    )
    print(f"{READY_PREFIX}{listener.sockets[0].getsockname()[1]}", flush=True)
    async with listener:
        await listener.serve_forever()


def main() -> None:
    """Command line entry point (uvloop when available)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ttft-ms", type=float, default=50.0)
    parser.add_argument("--itl-ms", type=float, default=20.0)
    parser.add_argument("--max-tokens", type=int, default=None)
    parser.add_argument("--stall-after", type=int, default=None)
    parser.add_argument("--stall-s", type=float, default=0.0)
    args = parser.parse_args()
    server = SSEServer(args.ttft_ms, args.itl_ms, args.max_tokens, args.stall_after, args.stall_s)
    try:
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:  # pragma: no cover
        runner = asyncio.Runner()
    with runner, contextlib.suppress(KeyboardInterrupt):
        runner.run(serve(server, args.port))


if __name__ == "__main__":
    main()
