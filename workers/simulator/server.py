"""The simulated OpenAI-compatible endpoint: a small, fast HTTP/1.1 server.

It serves ``POST /v1/chat/completions`` (streaming with usage, and non-streaming),
``GET /v1/models``, ``GET /health`` and ``GET /v1/simulator/stats`` (the latency model's
own timing drift). HTTP parsing is httptools (uvicorn's parser); responses are
pre-encoded bytes written straight to the transport, because a simulator that spends
milliseconds per event would itself become the latency it reports. Faults (error
statuses, stalls, streams cut short) are drawn per request from a seeded RNG.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import httptools
import orjson

from scenarios.model import SimulateSpec
from workers.simulator.batching import latency_for
from workers.simulator.latency import LatencyModel
from workers.tokenizer import load_local_tokenizer

if TYPE_CHECKING:
    from tokenizers import Tokenizer

_WORD = " tok"


@dataclass(slots=True)
class _Request:
    method: str
    path: str
    body: bytes


@dataclass(slots=True)
class _Faults:
    error: bool = False
    stall: bool = False
    cut: bool = False


@dataclass
class SimulatorApp:
    """Request handling shared by every connection of one simulated endpoint."""

    spec: SimulateSpec
    model: str = "simulated"
    latency: LatencyModel | None = None
    _rng: random.Random = field(init=False)
    tokenizer: Tokenizer | None = field(init=False, default=None)
    _chunks: dict[int, bytes] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.spec.seed)
        tokenizer_ref = self.spec.prompt_tokenizer
        self.tokenizer = None if tokenizer_ref is None else load_local_tokenizer(tokenizer_ref)
        if self.latency is None:
            self.latency = latency_for(self.spec)  # batching when spec.model is set
        model = orjson.dumps(self.model).decode()
        head = '{"id":"chatcmpl-sim","object":"chat.completion.chunk","created":0,"model":'
        self._prefix = f'data: {head}{model},"choices":[{{"index":0,"delta":'
        self._role = _chunk(
            f'{self._prefix}{{"role":"assistant","content":""}},"finish_reason":null}}]}}\n\n'
        )
        self._finish = f'{self._prefix}{{}},"finish_reason":"length"}}]}}\n\n'
        self._usage_head = f'data: {head}{model},"choices":[],"usage":'

    def count_prompt(self, messages: list[dict[str, Any]]) -> int:
        """Prompt tokens of a chat request as this endpoint reports them: its tokenizer's
        count of each message's text, else whitespace-separated words times
        ``prompt_token_ratio`` (docs/lengths.md). No chat template is added."""
        texts = [_content_text(message) for message in messages]
        if self.tokenizer is not None:
            encoded = self.tokenizer.encode_batch(texts, add_special_tokens=False)
            return max(sum(len(item.ids) for item in encoded), 1)
        words = sum(len(text.split()) for text in texts)
        return max(round(words * self.spec.prompt_token_ratio), 1)

    def draw_faults(self) -> _Faults:
        """Which faults this request suffers (seeded, so a run is reproducible)."""
        spec, rng = self.spec, self._rng
        return _Faults(
            error=spec.error_rate > 0 and rng.random() < spec.error_rate,
            stall=spec.stall_rate > 0 and rng.random() < spec.stall_rate,
            cut=spec.cut_rate > 0 and rng.random() < spec.cut_rate,
        )

    def token_chunk(self, count: int) -> bytes:
        """Pre-encoded HTTP chunk of one SSE event carrying ``count`` tokens."""
        chunk = self._chunks.get(count)
        if chunk is None:
            content = _WORD * count
            event = f'{self._prefix}{{"content":"{content}"}},"finish_reason":null}}]}}\n\n'
            chunk = self._chunks[count] = _chunk(event)
        return chunk

    def closing_chunks(self, prompt_tokens: int, completion_tokens: int, usage: bool) -> bytes:
        """Finish event, usage event (if asked for), ``[DONE]`` and the terminal chunk."""
        text = self._finish
        if usage:
            counts = _usage(prompt_tokens, completion_tokens)
            text += f"{self._usage_head}{counts.decode()}}}\n\n"
        text += "data: [DONE]\n\n"
        return _chunk(text) + b"0\r\n\r\n"

    def stats(self) -> bytes:
        """JSON of the latency model's own measurements (its timing drift), if it has any."""
        report = getattr(self.latency, "stats", None)
        return orjson.dumps(report() if callable(report) else {"latency_model": "fixed"})

    def role_chunk(self) -> bytes:
        """The role-only first event that OpenAI-style servers send (not a token)."""
        return self._role


class _Connection(asyncio.Protocol):
    """One client connection; requests on it are answered in order (HTTP/1.1)."""

    def __init__(self, app: SimulatorApp) -> None:
        self.app = app
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.queue: asyncio.Queue[_Request | None] = asyncio.Queue()
        self.url = b""
        self.body = bytearray()
        self.worker: asyncio.Task[None] | None = None

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing asyncio's.
        self.transport = cast(asyncio.Transport, transport)
        self.worker = asyncio.get_running_loop().create_task(self._serve())

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self._write_simple(400, b'{"error":{"message":"bad request"}}')
            self._close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.worker is not None:
            self.worker.cancel()

    # httptools callbacks
    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        method = self.parser.get_method().decode()
        path = httptools.parse_url(self.url).path.decode()
        self.queue.put_nowait(_Request(method, path, bytes(self.body)))
        self.url, self.body = b"", bytearray()

    # request handling
    async def _serve(self) -> None:
        while True:
            request = await self.queue.get()
            if request is None or self.transport is None or self.transport.is_closing():
                return
            await self._handle(request)

    async def _handle(self, request: _Request) -> None:
        if request.method == "GET" and request.path in ("/health", "/v1/health"):
            self._write_simple(200, b'{"status":"ok"}')
        elif request.method == "GET" and request.path == "/v1/models":
            models = {"object": "list", "data": [{"id": self.app.model, "object": "model"}]}
            self._write_simple(200, orjson.dumps(models))
        elif request.method == "GET" and request.path == "/v1/simulator/stats":
            self._write_simple(200, self.app.stats())
        elif request.method == "POST" and request.path == "/v1/chat/completions":
            await self._chat(request.body)
        else:
            self._write_simple(404, b'{"error":{"message":"not found"}}')

    async def _chat(self, raw: bytes) -> None:
        try:
            body = orjson.loads(raw)
            prompt_tokens = self.app.count_prompt(body["messages"])
        except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
            self._write_simple(400, b'{"error":{"message":"invalid chat request"}}')
            return
        max_tokens = int(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
        app = self.app
        faults = app.draw_faults()
        if faults.error:
            status = app.spec.error_status
            message = {
                "error": {"message": "simulated error", "type": "server_error", "code": status}
            }
            extra = b"retry-after: 1\r\n" if status == 429 else b""
            self._write_simple(status, orjson.dumps(message), extra)
            return
        if faults.stall:
            await asyncio.sleep(app.spec.stall_ms / 1000)
        assert app.latency is not None
        if body.get("stream"):
            await self._stream(prompt_tokens, max_tokens, faults.cut, _wants_usage(body))
        else:
            await self._complete(prompt_tokens, max_tokens)

    async def _stream(self, prompt_tokens: int, max_tokens: int, cut: bool, usage: bool) -> None:
        app, write = self.app, self._write
        assert app.latency is not None
        write(_STREAM_HEAD + app.role_chunk())
        produced = 0
        async for count in app.latency.emissions(prompt_tokens, max_tokens):
            write(app.token_chunk(count))
            produced += count
            if cut and produced * 2 >= max_tokens:
                self._close()  # mid-stream cut: no terminal chunk, no [DONE]
                return
        write(app.closing_chunks(prompt_tokens, produced, usage))

    async def _complete(self, prompt_tokens: int, max_tokens: int) -> None:
        assert self.app.latency is not None
        produced = 0
        async for count in self.app.latency.emissions(prompt_tokens, max_tokens):
            produced += count
        answer = {
            "id": "chatcmpl-sim",
            "object": "chat.completion",
            "created": 0,
            "model": self.app.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": _WORD * produced},
                    "finish_reason": "length",
                }
            ],
            "usage": orjson.loads(_usage(prompt_tokens, produced)),
        }
        self._write_simple(200, orjson.dumps(answer))

    def _write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def _write_simple(self, status: int, body: bytes, extra_headers: bytes = b"") -> None:
        head = (
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
        ).encode()
        self._write(head + extra_headers + b"\r\n" + body)

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()


_STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 429: "Too Many Requests"}


def _chunk(text: str) -> bytes:
    data = text.encode()
    return b"%x\r\n%s\r\n" % (len(data), data)


def _usage(prompt_tokens: int, completion_tokens: int) -> bytes:
    return orjson.dumps(
        {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
    )


def _wants_usage(body: dict[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and bool(options.get("include_usage"))


def _content_text(message: dict[str, Any]) -> str:
    """The text of one chat message (text parts of a multi-part content joined)."""
    content = message.get("content") or ""
    if isinstance(content, list):
        content = " ".join(str(part.get("text", "")) for part in content)
    return str(content)


async def start_server(app: SimulatorApp, host: str = "127.0.0.1", port: int = 0) -> asyncio.Server:
    """Listen on ``host:port`` (0 picks a free port) and serve ``app``."""
    loop = asyncio.get_running_loop()
    factory: Callable[[], asyncio.Protocol] = lambda: _Connection(app)  # noqa: E731
    return await loop.create_server(factory, host, port, backlog=4096)


__all__ = ["SimulatorApp", "start_server"]
