"""The simulated OpenAI-compatible endpoint: a small, fast HTTP/1.1 server.

It serves ``POST /v1/chat/completions`` (streaming with usage, and non-streaming), ``GET
/v1/models``, ``GET /health``, ``GET /v1/simulator/stats`` (the latency model's own
timing drift), ``GET /metrics`` (its state in vLLM's Prometheus names,
``workers/simulator/metrics.py``), ``POST /reset_prefix_cache`` (vLLM's route: empties
the prefix cache) and ``GET /tokenbench/requests?after=N`` (the log of the chat requests
it answered: ``request_log.py``). HTTP parsing is httptools (uvicorn's
parser); responses are pre-encoded bytes written straight to the transport, because a
simulator that spends milliseconds per event would itself become the latency it reports.
Faults (error statuses, 429 bursts, resets, stalls, streams cut short, answers that end
with ``[DONE]`` but no ``finish_reason``) are drawn per request from a seeded RNG
(``faults.py``); ``stream_usage: false`` streams no usage chunk, as llama-cpp-python's
server does. With ``prefix_cache`` it keeps the conversations it served
(``prefix_cache.py``): a request that starts with one prefills only the rest, and its
usage says how much was cached. Image content parts are counted by the endpoint's image
rule (``image_tokens``) and are prompt tokens like text, reported apart in
``usage.prompt_tokens_details`` if asked to. The hosted APIs' dialects are served beside
chat with the same model (``dialects/``): ``POST /v1/messages`` (Anthropic), ``POST
/v1/responses`` (OpenAI Responses), ``POST
/v1beta/models/{model}:streamGenerateContent?alt=sse`` (Gemini).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import httptools
import orjson

from scenarios.limits import MAX_REQUEST_LOG_PAGE
from scenarios.providers.simulate import SimulateSpec
from workers.client.request_ids import REQUEST_ID_HEADER, is_request_id, prompt_hash
from workers.prompts.tokenizer import load_local_tokenizer
from workers.simulator.batching import latency_for
from workers.simulator.dialects import Wire, dialect_of, serve
from workers.simulator.faults import FaultPlan, Faults
from workers.simulator.image_tokens import ImageRefused, image_tokens
from workers.simulator.latency import LatencyModel
from workers.simulator.metrics import CONTENT_TYPE, ServedCounters, metrics_text
from workers.simulator.prefix_cache import Blocks, PrefixCache, blocks
from workers.simulator.request_log import RequestLog
from workers.simulator.spans import RESPONSE_ID_PLACEHOLDER, SpanExporter, new_response_id

if TYPE_CHECKING:
    from tokenizers import Tokenizer

_WORD = " tok"
_ID_HEADER = REQUEST_ID_HEADER.encode()
_PLACEHOLDER = RESPONSE_ID_PLACEHOLDER.encode()


log = logging.getLogger("tokenbench.simulator")


@dataclass(slots=True)
class _Request:
    method: str
    path: str
    body: bytes
    query: str = ""
    request_id: str | None = None  # the x-tokenbench-request header, if sent
    received_at_ns: int = 0


@dataclass(slots=True)
class _Prompt:
    """A chat request's prompt as this endpoint sees it: its tokens, how many of them
    the prefix cache held, (with the cache) its blocks, and how many are image tokens."""

    tokens: int
    cached: int = 0
    blocks: Blocks | None = None
    images: int = 0  # of ``tokens``, the image tokens (the endpoint's image rule)


@dataclass
class SimulatorApp:
    """Request handling shared by every connection of one simulated endpoint."""

    spec: SimulateSpec
    model: str = "simulated"
    latency: LatencyModel | None = None
    _rng: random.Random = field(init=False)
    tokenizer: Tokenizer | None = field(init=False, default=None)
    _chunks: dict[int, bytes] = field(init=False, default_factory=dict)
    cache: PrefixCache | None = field(init=False, default=None)
    counters: ServedCounters = field(init=False, default_factory=ServedCounters)
    log: RequestLog = field(init=False)
    _plan: FaultPlan = field(init=False)
    exporter: SpanExporter | None = field(init=False, default=None)  # spans (spans.py)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.spec.seed)
        self._plan = FaultPlan(self.spec, self._rng)
        self.log = RequestLog(self.spec.request_log)
        self.counters = ServedCounters.for_spec(self.spec)  # and the optional /metrics figures

        self.exporter = SpanExporter.from_spec(self.spec)
        if self.spec.prefix_cache:
            self.cache = PrefixCache(self.spec.prefix_cache_words)
        tokenizer_ref = self.spec.prompt_tokenizer
        self.tokenizer = None if tokenizer_ref is None else load_local_tokenizer(tokenizer_ref)
        if self.latency is None:
            self.latency = latency_for(self.spec)  # batching when spec.model is set
        model = orjson.dumps(self.model).decode()
        head = f'{{"id":"{RESPONSE_ID_PLACEHOLDER}","object":"chat.completion.chunk",'
        head += '"created":0,"model":'
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

    def prompt(self, messages: list[dict[str, Any]]) -> _Prompt:
        """The prompt of a chat request (text and image tokens), its text looked up in the
        prefix cache if there is one; raises ImageRefused for an image it cannot read."""
        text = self.count_prompt(messages)
        images = self.count_images(messages)
        if self.cache is None:
            return _Prompt(text + images, images=images)
        conversation = blocks([(str(m.get("role", "")), _content_text(m)) for m in messages])
        cached = min(round(text * self.cache.cached_share(conversation)), text)
        self.counters.looked_up(text, cached)
        return _Prompt(text + images, cached, conversation, images)

    def served(self, prompt: _Prompt, answer: str) -> None:
        """Keep a served conversation in the cache, its answer as the next message (the
        next turn sends it back)."""
        if self.cache is not None and prompt.blocks is not None:
            self.cache.store(blocks([("assistant", answer)], after=prompt.blocks))

    def count_images(self, messages: list[dict[str, Any]]) -> int:
        """Image tokens of a chat request by the endpoint's image rule (docs/workloads.md);
        raises ImageRefused for an image it cannot read."""
        return image_tokens(messages, self.spec)

    def draw_faults(self, now_s: float | None = None) -> Faults:
        """Which faults a request received at monotonic ``now_s`` (default: now)
        suffers (seeded, so a run is reproducible)."""
        return self._plan.draw(time.monotonic() if now_s is None else now_s)

    def token_chunk(self, count: int) -> bytes:
        """Pre-encoded HTTP chunk of one SSE event carrying ``count`` tokens."""
        chunk = self._chunks.get(count)
        if chunk is None:
            content = _WORD * count
            event = f'{self._prefix}{{"content":"{content}"}},"finish_reason":null}}]}}\n\n'
            chunk = self._chunks[count] = _chunk(event)
        return chunk

    def finish_event(self, delta: str, reason: str) -> str:
        """An SSE finish event with ``delta`` (JSON) and finish ``reason``."""
        return f'{self._prefix}{delta},"finish_reason":"{reason}"}}]}}\n\n'

    def closing_chunks(
        self,
        prompt: _Prompt,
        completion_tokens: int,
        usage: bool,
        finish: str | None = None,
    ) -> bytes:
        """Finish event (``length`` unless ``finish`` is given), usage event (if asked
        for and ``stream_usage`` is on), ``[DONE]`` and the terminal chunk.
        ``prompt.tokens`` include its image tokens."""
        text = self._finish if finish is None else finish
        if usage and self.spec.stream_usage:
            counts = self.usage(prompt, completion_tokens)
            text += f"{self._usage_head}{counts.decode()}}}\n\n"
        text += "data: [DONE]\n\n"
        return _chunk(text) + b"0\r\n\r\n"

    def usage(self, prompt: _Prompt, completion_tokens: int) -> bytes:
        """The usage object; ``prompt_tokens_details`` with a prefix cache
        (``cached_tokens``, as OpenAI reports it) and with images (``image_tokens`` and
        ``text_tokens``, unless ``report_image_tokens`` is off)."""
        counts: dict[str, Any] = {
            "prompt_tokens": prompt.tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt.tokens + completion_tokens,
        }
        details: dict[str, int] = {}
        if self.cache is not None:
            details["cached_tokens"] = prompt.cached
        if prompt.images and self.spec.report_image_tokens:
            details["image_tokens"] = prompt.images
            details["text_tokens"] = prompt.tokens - prompt.images
        if details:
            counts["prompt_tokens_details"] = details
        return orjson.dumps(counts)

    def unfinished_end(self) -> bytes:
        """``[DONE]`` and the terminal chunk with no finish event before them: a stream
        that ends in good order around an answer that never finished."""
        return _chunk("data: [DONE]\n\n") + b"0\r\n\r\n"

    def stats(self) -> bytes:
        """JSON of the latency model's own measurements (its timing drift), if it has any,
        and of the prefix cache."""
        report = getattr(self.latency, "stats", None)
        answer: dict[str, Any] = report() if callable(report) else {"latency_model": "fixed"}
        if self.cache is not None:
            answer = {**answer, "prefix_cache": self.cache.stats()}
        return orjson.dumps(answer)

    def metrics(self) -> bytes:
        """The Prometheus text of ``GET /metrics`` (vLLM's names, workers/simulator/metrics.py)."""
        assert self.latency is not None
        return metrics_text(self.model, self.latency, self.counters)

    def tool_call_of(self, body: dict[str, Any]) -> str | None:
        """The function this request's answer calls, or None for a text answer: a forced
        ``tool_choice`` (``required`` or a named function) always calls, ``none`` never,
        ``auto`` with probability ``tool_call_rate`` (seeded; drawn only then, so runs
        without tools keep their fault draws)."""
        tools = body.get("tools")
        names: list[str] = []
        for tool in tools if isinstance(tools, list) else []:
            function = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                names.append(function["name"])
        if not names:
            return None
        choice = body.get("tool_choice", "auto")
        if isinstance(choice, dict):
            function = choice.get("function")
            name = function.get("name") if isinstance(function, dict) else None
            return name if name in names else names[0]
        if choice == "required":
            return names[0]
        rate = self.spec.tool_call_rate
        if choice == "auto" and rate > 0 and self._rng.random() < rate:
            return names[0]
        return None

    def tool_call_chunks(self, name: str) -> ToolCallChunks:
        """Encoder of one streamed tool call of function ``name``."""
        return ToolCallChunks(self._prefix, name)

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
        self.request_id: str | None = None
        self.worker: asyncio.Task[None] | None = None
        self.response_id = _PLACEHOLDER  # the answer's own id, written for the placeholder

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

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) == len(_ID_HEADER) and name.lower() == _ID_HEADER:
            text = value.decode("latin-1")
            self.request_id = text if is_request_id(text) else None

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        method = self.parser.get_method().decode()
        url = httptools.parse_url(self.url)
        query = (url.query or b"").decode("latin-1")
        request = _Request(
            method, url.path.decode(), bytes(self.body), query, self.request_id, time.time_ns()
        )
        self.queue.put_nowait(request)
        self.url, self.body, self.request_id = b"", bytearray(), None

    # request handling
    async def _serve(self) -> None:
        while True:
            request = await self.queue.get()
            if request is None or self.transport is None or self.transport.is_closing():
                return
            try:
                await self._handle(request)
            except Exception:
                # A bug here must not leave the client waiting for its read timeout:
                # drop the connection (it sees a reset, classified as such) and say why.
                log.exception("simulator: request %s %s failed", request.method, request.path)
                if self.transport is not None:
                    self.transport.abort()
                return

    async def _handle(self, request: _Request) -> None:
        if request.method == "GET" and request.path in ("/health", "/v1/health"):
            self._write_simple(200, b'{"status":"ok"}')
        elif request.method == "GET" and request.path == "/v1/models":
            models = {"object": "list", "data": [{"id": self.app.model, "object": "model"}]}
            self._write_simple(200, orjson.dumps(models))
        elif request.method == "GET" and request.path == "/v1/simulator/stats":
            self._write_simple(200, self.app.stats())
        elif request.method == "GET" and request.path == "/metrics":
            self._write_simple(200, self.app.metrics(), content_type=CONTENT_TYPE)
        elif request.method == "GET" and request.path == "/tokenbench/requests":
            after = _query_int(request.query, "after")
            limit = _query_int(request.query, "limit") or MAX_REQUEST_LOG_PAGE
            self._write_simple(200, self.app.log.page_json(after, limit))
        elif request.method == "POST" and request.path == "/reset_prefix_cache":
            if self.app.cache is not None:  # vLLM's route: an empty cache, answered 200
                self.app.cache.reset()
            self._write_simple(200, b'{"status":"ok"}')
        elif request.method == "POST" and request.path == "/v1/chat/completions":
            await self._chat(request)
        elif (dialect := dialect_of(request.method, request.path)) is not None:
            wire = Wire(self._write, self._write_simple, self._close)
            await serve(
                self.app,
                dialect,
                request.body,
                request.query,
                request.received_at_ns,
                request.request_id,
                wire,
            )
        else:
            self._write_simple(404, b'{"error":{"message":"not found"}}')

    async def _chat(self, request: _Request) -> None:
        app = self.app
        try:
            body = orjson.loads(request.body)
            messages = body["messages"]
            prompt = app.prompt(messages)
            hashed = prompt_hash((str(m.get("role", "")), _content_text(m)) for m in messages)
        except ImageRefused as exc:
            app.log.add(request.received_at_ns, request.request_id, None, 400, "bad_request")
            self._write_simple(400, orjson.dumps({"error": {"message": str(exc)}}))
            return
        except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
            app.log.add(request.received_at_ns, request.request_id, None, 400, "bad_request")
            self._write_simple(400, b'{"error":{"message":"invalid chat request"}}')
            return
        max_tokens = int(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
        faults = app.draw_faults()
        request_id = request.request_id
        if request_id is None and is_request_id(body.get("user")):
            request_id = body["user"]  # a gateway that dropped the header kept the body
        app.log.add(
            request.received_at_ns,
            request_id,
            hashed,
            0 if faults.reset else (faults.status or 200),
            _outcome(faults),
            faults.stall_ms,
        )
        if faults.stall_ms:
            await asyncio.sleep(faults.stall_ms / 1000)
        if faults.reset:
            self._close()  # before any byte of the answer, as a crashed upstream
            return
        if faults.status is not None:
            status = faults.status
            message = {
                "error": {"message": "simulated error", "type": "server_error", "code": status}
            }
            extra = b""
            if faults.retry_after_s is not None:
                extra = b"retry-after: %d\r\n" % faults.retry_after_s
            self._write_simple(status, orjson.dumps(message), extra)
            return
        assert app.latency is not None
        tool = app.tool_call_of(body)
        # Image tokens are prompt tokens: the batching model prefills them like text.
        if body.get("stream"):
            await self._stream(prompt, max_tokens, faults, _wants_usage(body), tool)
        else:
            await self._complete(prompt, max_tokens, tool)

    async def _stream(
        self, prompt: _Prompt, max_tokens: int, faults: Faults, usage: bool, tool: str | None
    ) -> None:
        app, write = self.app, self._write
        assert app.latency is not None
        rid = new_response_id()
        self.response_id = rid.encode()
        timing = None if app.exporter is None else app.exporter.begin()
        write(_STREAM_HEAD + app.role_chunk())
        calls = None if tool is None else app.tool_call_chunks(tool)
        produced = 0
        emissions = app.latency.emissions(prompt.tokens, max_tokens, prompt.cached)
        async for count in app.counters.counted(prompt.tokens, emissions):
            if calls is None:
                write(app.token_chunk(count))
            else:
                write(calls.delta(count, last=produced + count >= max_tokens))
            produced += count
            if timing is not None:
                timing.token()
            if faults.cut and produced * 2 >= max_tokens:
                self._close()  # mid-stream cut: no terminal chunk, no [DONE]
                return
            if faults.unfinished and produced * 2 >= max_tokens:
                write(app.unfinished_end())  # halfway, then [DONE] without a finish_reason
                return
        if calls is None:
            app.served(prompt, _WORD * produced)
            write(app.closing_chunks(prompt, produced, usage))
        else:
            finish = app.finish_event(calls.finish_delta(), "tool_calls")
            write(app.closing_chunks(prompt, produced, usage, finish))
        if timing is not None and app.exporter is not None:
            app.exporter.finish(rid, timing)

    async def _complete(self, prompt: _Prompt, max_tokens: int, tool: str | None) -> None:
        assert self.app.latency is not None
        self.response_id = new_response_id().encode()
        produced = 0
        emissions = self.app.latency.emissions(prompt.tokens, max_tokens, prompt.cached)
        async for count in self.app.counters.counted(prompt.tokens, emissions):
            produced += count
        if tool is None:
            self.app.served(prompt, _WORD * produced)
        message: dict[str, Any] = {"role": "assistant", "content": _WORD * produced}
        if tool is not None:
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": _TOOL_CALL_ID,
                        "type": "function",
                        "function": {"name": tool, "arguments": tool_arguments(produced)},
                    }
                ],
            }
        answer = {
            "id": RESPONSE_ID_PLACEHOLDER,
            "object": "chat.completion",
            "created": 0,
            "model": self.app.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "length" if tool is None else "tool_calls",
                }
            ],
            "usage": orjson.loads(self.app.usage(prompt, produced)),
        }
        self._write_simple(200, orjson.dumps(answer))

    def _write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data.replace(_PLACEHOLDER, self.response_id))

    def _write_simple(
        self,
        status: int,
        body: bytes,
        extra_headers: bytes = b"",
        content_type: bytes = b"application/json",
    ) -> None:
        head = (
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n".encode()
            + b"content-type: "
            + content_type
            + f"\r\ncontent-length: {len(body)}\r\n".encode()
        )
        self._write(head + extra_headers + b"\r\n" + body)

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()


_TOOL_CALL_ID = "call_sim_0"
_TOOL_ARG_HEAD = '{"query": "'
_TOOL_ARG_TAIL = '"}'


def tool_arguments(tokens: int) -> str:
    """The JSON arguments of a simulated call of ``tokens`` tokens: one word per token in
    a ``query`` string, closed by the last piece so the joined pieces parse."""
    return _TOOL_ARG_HEAD + "tok " * max(tokens - 2, 0) + _TOOL_ARG_TAIL


class ToolCallChunks:
    """The SSE events of one streamed tool call, as OpenAI sends them: the first delta
    carries the call's ``id``, ``type`` and function name with the first piece of
    ``arguments``, later deltas only further pieces under the same ``index``, and the
    finish event says ``tool_calls``. An event of ``count`` tokens carries ``count``
    words of the arguments, so lengths and timing are those of a text answer."""

    __slots__ = ("_closed", "_name", "_prefix", "_sent")

    def __init__(self, prefix: str, name: str) -> None:
        self._prefix = prefix
        self._name = name
        self._sent = 0
        self._closed = False

    def delta(self, count: int, last: bool) -> bytes:
        """One event of ``count`` tokens of the call; the ``last`` one closes the JSON."""
        piece = (_TOOL_ARG_HEAD if self._sent == 0 else "") + "tok " * count
        if last:
            piece += _TOOL_ARG_TAIL
            self._closed = True
        function: dict[str, Any] = {"arguments": piece}
        call: dict[str, Any] = {"index": 0, "function": function}
        if self._sent == 0:
            function["name"] = self._name
            call = {"index": 0, "id": _TOOL_CALL_ID, "type": "function", "function": function}
        self._sent += count
        delta = orjson.dumps({"tool_calls": [call]}).decode()
        return _chunk(f'{self._prefix}{delta},"finish_reason":null}}]}}\n\n')

    def finish_delta(self) -> str:
        """The finish event's delta: the arguments' closing piece if the answer ended
        before its planned last event (a cut context), else empty."""
        if self._closed:
            return "{}"
        tail = {"tool_calls": [{"index": 0, "function": {"arguments": _TOOL_ARG_TAIL}}]}
        return orjson.dumps(tail).decode()


_STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"x-request-id: " + _PLACEHOLDER + b"\r\ntransfer-encoding: chunked\r\n\r\n"
)  # x-request-id: the stream's own id, swapped in by _write as in the chunks
_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


def _outcome(faults: Faults) -> str:
    """The log's word for how a request is answered."""
    if faults.kind is not None and faults.fails:
        return faults.kind
    if faults.cut:
        return "cut"
    return "unfinished" if faults.unfinished else "ok"


def _query_int(query: str, name: str) -> int:
    """A non-negative integer query parameter (0 when absent or malformed)."""
    for part in query.split("&"):
        key, _, value = part.partition("=")
        if key == name and value.isdigit():
            return min(int(value), 2**62)

    return 0


def _chunk(text: str) -> bytes:
    data = text.encode()
    return b"%x\r\n%s\r\n" % (len(data), data)


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
