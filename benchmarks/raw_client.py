"""The floor of a streaming client's CPU: asyncio (uvloop) and httptools, nothing else.

Run by ``benchmarks/worker_cpu.py`` in a process of its own (``python benchmarks/
raw_client.py --url ... --streams N --duration S``; one JSON line out). Each of N
streams holds one keep-alive connection and sends the same pre-encoded chat request in
a closed loop; the response is parsed by httptools (chunked framing) and its SSE events
counted by their blank-line ends in each body piece. No httpx, no JSON decoding, no
stamps kept, no records: what is left is the least CPU any Python client of the same
event loop and parser spends per token event (the events of the role, finish, usage
and ``[DONE]`` chunks are not token events and are not counted).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import cast
from urllib.parse import urlsplit

import httptools
import psutil
import uvloop

NON_TOKEN_EVENTS = 4  # role, finish, usage, [DONE]: sent with every answer


class RawStream(asyncio.Protocol):
    """One stream: a connection that asks again as soon as an answer ends."""

    def __init__(self, request: bytes, tally: list[int], stop_at: float) -> None:
        self.request = request
        self.tally = tally  # [token events, answers]
        self.stop_at = stop_at
        self.parser = httptools.HttpResponseParser(self)
        self.events = 0
        self.transport: asyncio.Transport | None = None
        self.closed = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_body(self, body: bytes) -> None:
        self.events += body.count(b"\n\n")

    def on_message_complete(self) -> None:
        self.tally[0] += max(0, self.events - NON_TOKEN_EVENTS)
        self.tally[1] += 1
        self.events = 0
        assert self.transport is not None
        if time.monotonic() < self.stop_at:
            self.transport.write(self.request)
        else:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


def chat_request(url: str, tokens: int) -> bytes:
    """A streamed chat request of ``tokens`` answer tokens, encoded once."""
    parts = urlsplit(url)
    body = json.dumps(
        {
            "model": "fake",
            "messages": [{"role": "user", "content": "one two three four"}],
            "max_tokens": tokens,
            "stream": True,
        }
    ).encode()
    head = (
        f"POST {parts.path.rstrip('/')}/chat/completions HTTP/1.1\r\n"
        f"host: {parts.netloc}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def run(url: str, streams: int, duration: float, tokens: int) -> dict[str, float]:
    """Drive ``streams`` closed-loop streams for ``duration`` s; CPU per token event."""
    loop = asyncio.get_running_loop()
    parts = urlsplit(url)
    request = chat_request(url, tokens)
    tally = [0, 0]
    process = psutil.Process()
    cpu0, wall0 = process.cpu_times(), time.perf_counter()
    stop_at = time.monotonic() + duration
    protocols = []
    for _ in range(streams):
        _, protocol = await loop.create_connection(
            lambda: RawStream(request, tally, stop_at), parts.hostname, parts.port
        )
        protocols.append(protocol)
    await asyncio.gather(*(p.closed for p in protocols))
    wall = time.perf_counter() - wall0
    cpu1 = process.cpu_times()
    cpu_s = cpu1.user + cpu1.system - cpu0.user - cpu0.system
    events = tally[0]
    return {
        "events": events,
        "answers": tally[1],
        "wall_s": wall,
        "cpu_s": cpu_s,
        "cpu_us_per_event": cpu_s / events * 1e6 if events else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="the endpoint's /v1 base URL")
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        figures = runner.run(run(args.url, args.streams, args.duration, args.tokens))
    print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
