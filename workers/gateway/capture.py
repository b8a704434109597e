"""The gateway's capture process: everything a request leaves behind, off the primary path.

``python -m workers.gateway.capture --fd N`` is started by the gateway
(``workers/gateway/server.py``) with one end of a Unix socket pair. Its first frame is
the spec (config, session, instance, Redis URL); then, per request, a ``begin`` frame
(raw body, arrival stamp) and an ``end`` frame (the answer's bytes with the stamps of
their arrival; ``workers/gateway/handoff.py``). Here, on its own core:

- ``begin``: the sampling decision and, for a sample, the shadow task handed to the
  sender thread (``workers/gateway/sender.py``) at once, so shadows start while the
  primary is still answering, as before;
- ``end``: the primary's answer interpreted by the workers' own chat-stream code (TTFT,
  ITL, usage, failure class) into a record, plus the capture row; both go to the sink
  (``workers/gateway/sink.py``), which publishes them to Redis in batches.

The process runs at a lower CPU priority (nice 10) than the gateway's primary path.
A ``begin`` whose ``end`` never came (dropped by a full hand-off) is forgotten after
``MAX_PENDING`` newer ones, counted as ``orphaned``. The process ignores SIGINT (Ctrl-C
reaches the whole process group; the gateway decides when to stop) and stops on a
``close`` frame or when the socket closes (the gateway died), after flushing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import hashlib
import os
import signal
import socket
from dataclasses import asdict, dataclass
from typing import Any, cast

import orjson
from redis.asyncio import Redis

from scenarios.gateway_config import GatewayConfig, parse_gateway_config
from scenarios.wire.contract import FORWARDED_PARAMS, PRIMARY_SHARD, SESSION_ATTEMPT
from workers.client.adapters.openai_chat import ChatParser
from workers.client.errors import ErrorClass, RequestFailure, redact
from workers.client.result import RequestResult
from workers.client.retry import status_failure
from workers.gateway.handoff import FrameReader, frame
from workers.gateway.proxy import primary_key
from workers.gateway.sampling import Sampler, messages_digest
from workers.gateway.sender import ShadowSender
from workers.gateway.sink import RecordSink
from workers.prompts.plan import CHARS_PER_TOKEN, PlannedRequest
from workers.runtime.event_loop import new_loop
from workers.runtime.gc_tuning import THRESHOLDS as GC_THRESHOLDS
from workers.shard.rows import RowContext, record_row, wall_ns

MAX_PENDING = 65_536
CAPTURE_NICENESS = 10
MAX_NONSTREAM_PARSE = 4 * 1024 * 1024


@dataclass
class CaptureStats:
    """Counters of the capture process."""

    sampled: int = 0
    primary_errors: int = 0
    captured: int = 0
    orphaned: int = 0
    unmatched_ends: int = 0


@dataclass(frozen=True, slots=True)
class Begun:
    """What ``end`` needs of a request's ``begin``."""

    seq: int
    received: int
    messages: list[Any]
    max_tokens: int | None
    sampled: bool
    enqueued: bool


@dataclass(frozen=True, slots=True)
class Answer:
    """The primary's answer as the gateway saw it (the ``end`` frame)."""

    sent: int
    status: int | None
    headers: dict[str, str]
    chunks: list[tuple[int, bytes]]
    end: int
    error: tuple[str, str] | None
    stream: bool


def max_tokens_of(body: dict[str, Any]) -> int | None:
    """The client's bound on the answer's length, if it gave a valid one."""
    value = body.get("max_completion_tokens") or body.get("max_tokens")
    return value if isinstance(value, int) and value >= 1 else None


def prompt_chars(messages: list[Any]) -> int:
    """Characters of text in the conversation (its planned prompt length's basis)."""
    total = 0
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            total += len(content)
        elif isinstance(content, list):
            total += sum(len(part.get("text", "")) for part in content if isinstance(part, dict))
    return total


def planned_tokens(messages: list[Any]) -> int:
    """The prompt's length in tokens as the workers estimate it."""
    return max(1, round(prompt_chars(messages) / CHARS_PER_TOKEN))


def primary_result(received: int, answer: Answer, secrets: tuple[str, ...]) -> RequestResult:
    """The measured outcome of one forwarded request, as a worker would have measured it.

    Stamps are the arrival stamps the gateway took before passing the bytes on; a
    streamed body is interpreted by the workers' chat-stream parser, a plain one gives
    first byte, E2E and usage only.
    """
    result = RequestResult(intended_start=received, sent=answer.sent, end=answer.end)
    if answer.chunks:
        result.first_byte = answer.chunks[0][0]
    if answer.status is None:  # never got an answer's head
        kind, message = answer.error or ("connect", "no answer")
        result.failure = RequestFailure(ErrorClass(kind), redact(message, secrets))
        return result
    if answer.status != 200:
        body = b"".join(chunk for _, chunk in answer.chunks)
        result.failure = status_failure(answer.status, answer.headers, body, secrets)
        return result
    if answer.stream:
        parser = ChatParser(result)
        try:
            for stamp, chunk in answer.chunks:
                parser.feed(chunk, stamp)
            if answer.error is None:
                parser.finish(answer.end)
        except RequestFailure as failure:
            result.failure = failure  # the stream reported an error: recorded as sent
    elif answer.error is None:
        _usage_of(b"".join(chunk for _, chunk in answer.chunks)[:MAX_NONSTREAM_PARSE], result)
    if answer.error is not None and result.failure is None:
        kind, message = answer.error
        result.failure = RequestFailure(ErrorClass(kind), redact(message, secrets))
    return result


def _usage_of(body: bytes, result: RequestResult) -> None:
    try:
        usage = orjson.loads(body).get("usage")
    except (orjson.JSONDecodeError, AttributeError):
        result.failure = RequestFailure(ErrorClass.PROTOCOL, "response is not a JSON object")
        return
    if isinstance(usage, dict):
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if isinstance(prompt, int) and isinstance(completion, int):
            result.prompt_tokens, result.completion_tokens = prompt, completion
            result.token_count_source = result.prompt_count_source = "usage"


class Capture:
    """The capture process's state: sampling, shadow hand-off, records and sink."""

    def __init__(
        self,
        config: GatewayConfig,
        run_id: str,
        instance: str,
        sender: ShadowSender,
        sink: RecordSink,
        salt: str,
        secrets: tuple[str, ...],
    ) -> None:
        self.config = config
        self.run_id = run_id
        self.instance = instance
        self.sender = sender
        self.sink = sink
        self.salt = salt
        self.secrets = secrets
        self.stats = CaptureStats()
        self.sampler = Sampler(config.sample_rate, config.sample_by, salt)
        self.rows = RowContext(
            run_id=run_id,
            stage=0,
            shard_id=PRIMARY_SHARD,
            attempt=SESSION_ATTEMPT,
            provider=config.primary.name,
            model=config.primary.model,
            region=config.gateway_region,
            worker=instance,
            load_kind="live",
            concurrency=0,
        )
        self.pending: dict[str, Begun] = {}

    def begin(
        self, key: str, seq: int, received: int, raw: bytes, sample_value: str | None
    ) -> None:
        """A request was read (and validated) by the gateway: sample it, maybe mirror it."""
        body = orjson.loads(raw)
        messages = body["messages"]
        max_tokens = max_tokens_of(body)
        headers = {} if sample_value is None else {self.sampler.field: sample_value}
        sampled = bool(self.config.shadows) and self.sampler.decide(body, headers)
        enqueued = False
        if sampled:
            self.stats.sampled += 1
            enqueued = self.sender.offer(
                {
                    "request_key": key,
                    "seq": seq,
                    "messages": messages,
                    "max_tokens": max_tokens,
                    "params": {name: body[name] for name in FORWARDED_PARAMS if name in body},
                    "prompt_tokens": planned_tokens(messages),
                },
                len(raw),
                received,
            )
        self.pending[key] = Begun(seq, received, messages, max_tokens, sampled, enqueued)
        if len(self.pending) > MAX_PENDING:
            del self.pending[next(iter(self.pending))]
            self.stats.orphaned += 1

    def end(self, key: str, answer: Answer) -> None:
        """The answer is over: its record and capture row go to the sink."""
        begun = self.pending.pop(key, None)
        if begun is None:
            self.stats.unmatched_ends += 1
            return
        messages = begun.messages
        chars = prompt_chars(messages)
        planned = max(1, round(chars / CHARS_PER_TOKEN))
        result = primary_result(begun.received, answer, self.secrets)
        if result.failure is not None:
            self.stats.primary_errors += 1
        request = PlannedRequest(begun.seq, planned, begun.max_tokens or 0, "")
        record = record_row(self.rows, request, result)
        # The one column that differs per request (a dataclasses.replace of the context
        # per request cost more than the rest of the record's identity).
        record["request_key"] = key
        store_text = self.config.privacy.store_text
        capture: dict[str, object] = {
            "run_id": self.run_id,
            "request_key": key,
            "seq": begun.seq,
            "gateway": self.instance,
            "received_at": wall_ns(begun.received),
            "stream": answer.stream,
            "sampled": begun.sampled,
            "enqueued": begun.enqueued,
            "prompt_chars": chars,
            "prompt_sha256": hashlib.sha256(messages_digest(messages, self.salt)).hexdigest(),
            "max_tokens": begun.max_tokens,
            "messages": orjson.dumps(messages).decode() if store_text else None,
        }
        self.sink.add(record, capture)
        self.stats.captured += 1

    def counters(self) -> dict[str, Any]:
        """The counters ``/gateway/stats`` shows."""
        return {
            **asdict(self.stats),
            "pending": len(self.pending),
            "shadow": {**asdict(self.sender.stats), "pending": self.sender.pending},
            "sink": asdict(self.sink.stats),
        }


class CaptureConnection(asyncio.Protocol):
    """The capture process's end of the socket: the spec, then frames in, answers out."""

    def __init__(self, done: asyncio.Future[bool]) -> None:
        self.done = done
        self.capture: Capture | None = None
        self.redis: Redis | None = None
        self.reader = FrameReader()
        self.transport: asyncio.WriteTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the transport for answers."""
        # uvloop's transports are not registered as asyncio's classes (no isinstance).
        self.transport = cast(asyncio.WriteTransport, transport)

    def data_received(self, data: bytes) -> None:
        """Act on every complete frame, in order."""
        for message in self.reader.feed(data):
            kind, capture = message[0], self.capture
            if kind == "spec":
                self.capture = self._start(orjson.loads(message[1]))
            elif capture is None:
                continue  # no spec yet: nothing to capture into
            elif kind == "begin":
                capture.begin(*message[1:])
            elif kind == "end":
                key, sent, status, headers, chunks, end, error, stream = message[1:]
                answer = Answer(sent, status, dict(headers), chunks, end, error, stream)
                capture.end(key, answer)
            elif kind == "stats":
                self.answer(("stats", message[1], capture.counters()))
            elif kind == "close" and not self.done.done():
                self.done.set_result(True)

    def _start(self, spec: dict[str, Any]) -> Capture:
        config = parse_gateway_config(spec["config"], "gateway config")
        salt_env = config.privacy.hash_salt_env
        salt = os.environ.get(salt_env, "") if salt_env else ""
        key = primary_key(config)
        from workers.runtime.celery_app import app as celery_app  # noqa: PLC0415 - reads settings

        sender = ShadowSender(
            celery=celery_app,
            broker_url=spec["redis_url"],
            run_id=spec["run_id"],
            # Dumped once: the worker validates the providers of each batch it takes.
            providers=[p.model_dump(mode="json") for p in config.shadows],
            regions=list(config.regions),
            max_pending=config.max_pending,
            max_backlog=config.max_queue_backlog,
            ttl_s=config.shadow_ttl_s,
        )
        self.redis = Redis.from_url(spec["redis_url"])
        sink = RecordSink(self.redis, spec["run_id"])
        secrets = (key,) if key else ()
        capture = Capture(config, spec["run_id"], spec["instance"], sender, sink, salt, secrets)
        sender.start()
        sink.start()
        gc.collect()
        gc.freeze()  # start-up objects are never scanned again: shorter GC pauses
        # A worker's thresholds: young collections are rarer (every request allocates).
        gc.set_threshold(*GC_THRESHOLDS)
        return capture

    def answer(self, message: tuple[Any, ...]) -> None:
        """Send ``message`` to the gateway (if it is still there)."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(frame(message))

    def connection_lost(self, exc: Exception | None) -> None:
        """The gateway is gone: flush and stop."""
        self.transport = None
        if not self.done.done():
            self.done.set_result(False)


async def serve(sock: socket.socket) -> None:
    """Capture until told to stop (or the gateway is gone); flush on the way out."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[bool] = loop.create_future()
    transport, protocol = await loop.create_unix_connection(
        lambda: CaptureConnection(done), sock=sock
    )
    asked = await done
    capture = protocol.capture
    if capture is not None:
        await asyncio.to_thread(capture.sender.stop)
        with contextlib.suppress(Exception):
            await capture.sink.close()
    if protocol.redis is not None:
        await protocol.redis.aclose()
    if asked:
        protocol.answer(("closed",))
    transport.close()  # after what is buffered (the answer) is written


def main() -> None:
    """Entry point of the capture process."""
    parser = argparse.ArgumentParser(description="tokenbench gateway capture process")
    parser.add_argument("--fd", type=int, required=True)
    args = parser.parse_args()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # When the cores are busy, the primary path goes first: the capture can wait (its
    # hand-off buffer absorbs the delay), a live answer cannot.
    with contextlib.suppress(OSError):
        os.nice(CAPTURE_NICENESS)
    sock = socket.socket(fileno=args.fd)
    with asyncio.Runner(loop_factory=new_loop) as runner:
        runner.run(serve(sock))


if __name__ == "__main__":
    main()
