"""Serving a request in one of the hosted APIs' dialects, with the simulator's own model.

A dialect (``anthropic.py``, ``openai_responses.py``, ``gemini.py``) says how its request
reads as a chat request (:meth:`Dialect.as_chat`: messages, ``max_tokens``, OpenAI-style
tools) and how its answer is written (an :class:`Encoder` of SSE events); everything else
is the chat endpoint's: the prompt count and prefix cache, the fault draws, the request
log, the latency model and its counters, the tool-call choice. So every load shape and
fault a scenario sets works against each dialect as against chat completions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from workers.client.request_ids import is_request_id, prompt_hash
from workers.simulator.faults import Faults

if TYPE_CHECKING:
    from workers.simulator.server import SimulatorApp

__all__ = [
    "ArgumentPieces",
    "Dialect",
    "Encoder",
    "Prompt",
    "Wire",
    "chat_tools",
    "serve",
    "sse",
    "text_of",
]


class Prompt(Protocol):
    """A request's prompt as the endpoint counted it."""

    tokens: int
    cached: int


class Encoder(Protocol):
    """The SSE events of one streamed answer (text, without HTTP chunk framing)."""

    def start(self, prompt: Prompt) -> str:
        """Events before the first token (may be empty)."""
        ...

    def tokens(self, count: int, last: bool) -> str:
        """One event carrying ``count`` tokens of text (or of the tool call's arguments)."""
        ...

    def end(self, prompt: Prompt, produced: int) -> str:
        """The events ending the answer: why it ended, usage (``prompt.cached`` as the
        dialect reports cache reads), and the dialect's last event."""
        ...


class Dialect(Protocol):
    """One API's request and answer shapes."""

    name: str
    request_id_header: str | None  # the header carrying the server's request id

    def as_chat(self, body: dict[str, Any], query: str) -> dict[str, Any]:
        """The request (its JSON body and URL query) as a chat-completions body
        (``messages``, ``max_tokens``, ``stream``, ``tools``, ``tool_choice``);
        KeyError/TypeError/ValueError when malformed."""
        ...

    def encoder(self, model: str, tool: str | None, serial: int, cache: bool) -> Encoder:
        """The answer's encoder: text, or a call of function ``tool``; ``serial`` makes
        its ids unique on this endpoint; ``cache``: the endpoint has a prefix cache, so
        usage reports cache reads (else they are left out: unknown)."""
        ...

    def error(self, status: int, message: str) -> bytes:
        """An error answer's JSON body in the dialect's shape."""
        ...


@dataclass(frozen=True)
class Wire:
    """How the connection writes: raw bytes, a whole small answer, a close."""

    write: Callable[[bytes], None]
    simple: Callable[[int, bytes, bytes], None]
    close: Callable[[], None]


@dataclass(slots=True)
class _Serial:
    value: int = 0

    def next(self) -> int:
        self.value += 1
        return self.value


_SERIAL = _Serial()


async def serve(
    app: SimulatorApp,
    dialect: Dialect,
    raw: bytes,
    query: str,
    received_at_ns: int,
    request_id: str | None,
    wire: Wire,
) -> None:
    """Answer one request of ``dialect`` whose body is ``raw``."""
    try:
        chat = dialect.as_chat(orjson.loads(raw), query)
        messages = chat["messages"]
        prompt = app.prompt(messages)
        hashed = prompt_hash((str(m.get("role", "")), _text(m)) for m in messages)
        max_tokens = int(chat["max_tokens"])
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError):
        app.log.add(received_at_ns, request_id, None, 400, "bad_request")
        wire.simple(400, dialect.error(400, f"invalid {dialect.name} request"), b"")
        return
    if not chat.get("stream"):
        app.log.add(received_at_ns, request_id, hashed, 400, "bad_request")
        wire.simple(400, dialect.error(400, "the simulator streams only"), b"")
        return
    faults = app.draw_faults()
    app.log.add(
        received_at_ns,
        request_id if is_request_id(request_id) else None,
        hashed,
        0 if faults.reset else (faults.status or 200),
        _outcome(faults),
        faults.stall_ms,
    )
    if faults.stall_ms:
        await asyncio.sleep(faults.stall_ms / 1000)
    if faults.reset:
        wire.close()
        return
    serial = _SERIAL.next()
    if faults.status is not None:
        extra = b""
        if faults.retry_after_s is not None:
            extra = b"retry-after: %d\r\n" % faults.retry_after_s
        wire.simple(faults.status, dialect.error(faults.status, "simulated error"), extra)
        return
    assert app.latency is not None
    tool = app.tool_call_of(chat)
    encoder = dialect.encoder(app.model, tool, serial, app.cache is not None)
    head = _STREAM_HEAD
    if dialect.request_id_header is not None:
        head += f"{dialect.request_id_header}: req_sim_{serial}\r\n".encode()
    wire.write(head + b"\r\n" + _chunk(encoder.start(prompt)))
    produced = 0
    emissions = app.latency.emissions(prompt.tokens, max_tokens, prompt.cached)
    async for count in app.counters.counted(prompt.tokens, emissions):
        wire.write(_chunk(encoder.tokens(count, last=produced + count >= max_tokens)))
        produced += count
        if faults.cut and produced * 2 >= max_tokens:
            wire.close()  # mid-stream cut: no terminal chunk
            return
        if faults.unfinished and produced * 2 >= max_tokens:
            wire.write(b"0\r\n\r\n")  # the body ends in good order, the answer never does
            return
    if tool is None:
        app.served(prompt, " tok" * produced)
    wire.write(_chunk(encoder.end(prompt, produced)) + b"0\r\n\r\n")


def _outcome(faults: Faults) -> str:
    """The log's word for how a request is answered (as the chat endpoint's log says it)."""
    if faults.kind is not None and faults.fails:
        return faults.kind
    if faults.cut:
        return "cut"
    return "unfinished" if faults.unfinished else "ok"


def _text(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    return str(content)


def _chunk(text: str) -> bytes:
    if not text:
        return b""
    data = text.encode()
    return b"%x\r\n%s\r\n" % (len(data), data)


class ArgumentPieces:
    """The JSON arguments of a simulated tool call, written a few tokens at a time as the
    chat endpoint writes them: one ``tok`` word per token in a ``query`` string, closed
    by the last piece so the joined pieces parse."""

    __slots__ = ("closed", "sent")

    def __init__(self) -> None:
        self.sent = 0
        self.closed = False

    def piece(self, count: int, last: bool) -> str:
        """The next ``count`` tokens of the arguments; the ``last`` piece closes them."""
        text = ('{"query": "' if self.sent == 0 else "") + "tok " * count
        self.sent += count
        if last:
            text += '"}'
            self.closed = True
        return text

    def whole(self, tokens: int) -> dict[str, str]:
        """The arguments of a call of ``tokens`` tokens as one object (Gemini's calls)."""
        return {"query": "tok " * max(tokens - 2, 0)}


def text_of(content: Any) -> str:
    """The text of a message's content: a string, or the ``text`` of its parts/blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    if content is None:
        return ""
    raise TypeError("content is neither text nor a list of parts")


def chat_tools(names: list[str]) -> list[dict[str, Any]]:
    """Function names as the chat endpoint's ``tools``."""
    return [{"type": "function", "function": {"name": name}} for name in names]


def sse(event: str | None, payload: dict[str, Any]) -> str:
    """One SSE event: ``event:`` line (when named) and its JSON ``data:`` line."""
    data = orjson.dumps(payload).decode()
    return f"event: {event}\ndata: {data}\n\n" if event else f"data: {data}\n\n"


_STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n"
)
