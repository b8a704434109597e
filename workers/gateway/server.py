"""The gateway's HTTP application: an OpenAI-compatible front of the primary provider.

Routes: ``POST /v1/chat/completions`` (streaming and not), ``GET /v1/models`` (the
primary's list), ``GET /gateway/stats`` (counters of requests, samples and drops) and
``GET /gateway/health``. Per request the handler does, in order: read and parse the
body; decide sampling and, for a sample, put its task on the sender's bounded queue
(no network); forward to the primary and stream its answer back through
``proxy.relay_*``. When the answer ends, its record and capture row go to the sink,
which publishes them in the background. Nothing on this path waits for a shadow, the
broker or DuckDB.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import httpx
import orjson
from redis.asyncio import Redis
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from scenarios.gateway_config import GatewayConfig
from scenarios.providers import OpenAIProvider, SimulatedProvider
from scenarios.wire import FORWARDED_PARAMS, PRIMARY_SHARD, SESSION_ATTEMPT
from workers.client.errors import classify_exception
from workers.client.http import make_client
from workers.client.result import RequestResult
from workers.client.streaming import Limits
from workers.gateway.proxy import (
    Upstream,
    UsageFilter,
    error_answer,
    now,
    passed_headers,
    relay_body,
    relay_stream,
)
from workers.gateway.sampling import Sampler, messages_digest
from workers.gateway.sender import ShadowSender
from workers.gateway.sink import RecordSink
from workers.prompts import CHARS_PER_TOKEN, PlannedRequest
from workers.provider_setup import ProviderSetupError
from workers.rows import RowContext, record_row, wall_ns
from workers.secrets import Secrets, host_of, is_reserved, owner_bindings
from workers.simulator.process import SimulatorPool


@dataclass
class GatewayStats:
    """Counters of the request path (written on the event loop only)."""

    requests: int = 0
    bad_requests: int = 0
    primary_errors: int = 0
    sampled: int = 0


@dataclass
class Gateway:
    """The state one gateway process serves requests with."""

    config: GatewayConfig
    run_id: str
    instance: str
    sender: ShadowSender
    redis_url: str
    stats: GatewayStats = field(default_factory=GatewayStats)

    def __post_init__(self) -> None:
        salt_env = self.config.privacy.hash_salt_env
        self.salt = os.environ.get(salt_env, "") if salt_env else ""
        self.sampler = Sampler(self.config.sample_rate, self.config.sample_by, self.salt)
        # Dumped once: the task payload is built per sample without any validation cost;
        # the worker validates it.
        self.shadows_json = [p.model_dump(mode="json") for p in self.config.shadows]
        self.seq = itertools.count()
        self.rows = RowContext(
            run_id=self.run_id,
            stage=0,
            shard_id=PRIMARY_SHARD,
            attempt=SESSION_ATTEMPT,
            provider=self.config.primary.name,
            model=self.config.primary.model,
            region=self.config.gateway_region,
            worker=self.instance,
            load_kind="live",
            concurrency=0,
        )
        self.http: httpx.AsyncClient | None = None
        self.upstream: Upstream | None = None
        self.sink: RecordSink | None = None
        self._simulators: SimulatorPool | None = None
        self._redis: Redis | None = None

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Connect the HTTP client and Redis, start the sink and the shadow sender."""
        primary = self.config.primary
        salt_env = self.config.privacy.hash_salt_env
        if salt_env and is_reserved(salt_env):
            raise RuntimeError(
                f"privacy.hash_salt_env: {salt_env} is a tokenbench setting, not a salt"
            )
        key = None
        if isinstance(primary, OpenAIProvider):
            base_url = primary.base_url
            # The operator's own config: its key goes to its own primary's host, through
            # the same lookup workers use (tokenbench settings are never sent).
            secrets = Secrets(owner_bindings([primary]), os.environ, "this gateway")
            try:
                key = secrets.get(primary.api_key_env, host_of(base_url), primary.name)
            except ProviderSetupError as exc:
                raise RuntimeError(str(exc)) from None
        else:
            assert isinstance(primary, SimulatedProvider)
            self._simulators = SimulatorPool()
            base_url = await self._simulators.base_url(primary)
        base = base_url.rstrip("/")
        self.upstream = Upstream(
            f"{base}/chat/completions", f"{base}/models", key, Limits.of(primary, key)
        )
        self.http = make_client()
        self._redis = Redis.from_url(self.redis_url)
        self.sink = RecordSink(self._redis, self.run_id)
        self.sink.start()
        self.sender.start()

    async def stop(self) -> None:
        """Send queued samples (briefly), publish buffered rows, close connections."""
        await asyncio.to_thread(self.sender.stop)
        if self.sink is not None:
            await self.sink.close()
        if self.http is not None:
            await self.http.aclose()
        if self._simulators is not None:
            await self._simulators.close()
        if self._redis is not None:
            await self._redis.aclose()

    # ------------------------------------------------------------------ routes

    async def chat(self, request: Request) -> Response:
        """``POST /v1/chat/completions``: forward, measure, maybe mirror."""
        received = now()
        http, upstream = self._ready()
        raw = await request.body()
        try:
            body = orjson.loads(raw)
            messages = body["messages"]
            if not isinstance(messages, list) or not messages:
                raise TypeError
        except (orjson.JSONDecodeError, KeyError, TypeError):
            self.stats.bad_requests += 1
            return _openai_error(400, "body must be a JSON object with a messages list")
        self.stats.requests += 1
        seq, key = next(self.seq), uuid.uuid4().hex
        stream = body.get("stream") is True
        max_tokens = _max_tokens(body)
        chars = _prompt_chars(messages)
        planned = max(1, round(chars / CHARS_PER_TOKEN))
        options = body.get("stream_options")
        wants_usage = isinstance(options, dict) and options.get("include_usage") is True
        inject = stream and self.config.inject_usage and not wants_usage
        content = raw
        if inject:
            content = orjson.dumps(
                {**body, "stream_options": {**(options or {}), "include_usage": True}}
            )
        sampled = bool(self.shadows_json) and self.sampler.decide(body, request.headers)
        enqueued = False
        if sampled:
            self.stats.sampled += 1
            enqueued = self.sender.offer(self._task(key, seq, body, max_tokens, planned))

        def done(result: RequestResult) -> None:
            self._recorded(result, seq, key, stream, sampled, enqueued, messages, max_tokens)

        result = RequestResult(intended_start=received)
        result.sent = now()
        try:
            answer = await http.send(
                http.build_request(
                    "POST",
                    upstream.chat_url,
                    content=content,
                    headers=upstream.headers(
                        request.headers.get("authorization"),
                        "text/event-stream" if stream else "application/json",
                    ),
                    timeout=upstream.limits.http_timeout(),
                ),
                stream=True,
            )
        except Exception as exc:  # every failure to reach the primary is a 502 and a row
            result.end = now()
            result.failure = classify_exception(exc, upstream.limits.secrets)
            done(result)
            return _openai_error(502, f"primary unreachable: {result.failure}", "upstream_error")
        headers = {**passed_headers(answer), "x-tokenbench-request-key": key}
        if answer.status_code != 200:
            error_body = await error_answer(answer, result, upstream.limits.secrets)
            done(result)
            return Response(error_body, answer.status_code, headers=headers)
        iterator: AsyncIterator[bytes]
        if stream:
            headers["cache-control"] = "no-cache"
            usage_filter = UsageFilter() if inject else None
            iterator = relay_stream(answer, result, planned, usage_filter, done)
        else:
            iterator = relay_body(answer, result, done)
        return StreamingResponse(iterator, status_code=200, headers=headers)

    async def models(self, request: Request) -> Response:
        """``GET /v1/models``: the primary's answer, passed through."""
        http, upstream = self._ready()
        try:
            answer = await http.get(
                upstream.models_url,
                headers=upstream.headers(request.headers.get("authorization"), "application/json"),
                timeout=upstream.limits.http_timeout(),
            )
        except httpx.HTTPError as exc:
            failure = classify_exception(exc, upstream.limits.secrets)
            return _openai_error(502, f"primary unreachable: {failure}", "upstream_error")
        return Response(answer.content, answer.status_code, headers=passed_headers(answer))

    async def stats_view(self, _: Request) -> Response:
        """``GET /gateway/stats``: requests, samples, hand-off and publishing counters."""
        return JSONResponse(
            {
                "session": self.run_id,
                "instance": self.instance,
                **asdict(self.stats),
                "shadow": {**asdict(self.sender.stats), "pending": self.sender.pending},
                "sink": asdict(self.sink.stats) if self.sink is not None else {},
            }
        )

    # ------------------------------------------------------------------ helpers

    def _ready(self) -> tuple[httpx.AsyncClient, Upstream]:
        if self.http is None or self.upstream is None:
            raise RuntimeError("gateway not started")
        return self.http, self.upstream

    def _task(
        self, key: str, seq: int, body: dict[str, Any], max_tokens: int | None, planned: int
    ) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "request_key": key,
            "seq": seq,
            "messages": body["messages"],
            "max_tokens": max_tokens,
            "params": {name: body[name] for name in FORWARDED_PARAMS if name in body},
            "prompt_tokens": planned,
            "providers": self.shadows_json,
        }

    def _recorded(
        self,
        result: RequestResult,
        seq: int,
        key: str,
        stream: bool,
        sampled: bool,
        enqueued: bool,
        messages: list[Any],
        max_tokens: int | None,
    ) -> None:
        if result.failure is not None:
            self.stats.primary_errors += 1
        if self.sink is None:
            return
        chars = _prompt_chars(messages)
        planned = PlannedRequest(seq, max(1, round(chars / CHARS_PER_TOKEN)), max_tokens or 0, "")
        record = record_row(replace(self.rows, request_key=key), planned, result)
        store_text = self.config.privacy.store_text
        capture: dict[str, object] = {
            "run_id": self.run_id,
            "request_key": key,
            "seq": seq,
            "gateway": self.instance,
            "received_at": wall_ns(result.intended_start),
            "stream": stream,
            "sampled": sampled,
            "enqueued": enqueued,
            "prompt_chars": chars,
            "prompt_sha256": hashlib.sha256(messages_digest(messages, self.salt)).hexdigest(),
            "max_tokens": max_tokens,
            "messages": orjson.dumps(messages).decode() if store_text else None,
        }
        self.sink.add(record, capture)


def _max_tokens(body: dict[str, Any]) -> int | None:
    value = body.get("max_completion_tokens") or body.get("max_tokens")
    return value if isinstance(value, int) and value >= 1 else None


def _prompt_chars(messages: list[Any]) -> int:
    total = 0
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            total += len(content)
        elif isinstance(content, list):
            total += sum(len(part.get("text", "")) for part in content if isinstance(part, dict))
    return total


def _openai_error(status: int, message: str, kind: str = "invalid_request_error") -> Response:
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status)


def create_gateway_app(gateway: Gateway) -> Starlette:
    """The ASGI application serving ``gateway``."""

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        await gateway.start()
        try:
            yield
        finally:
            await gateway.stop()

    async def health(_: Request) -> Response:
        return JSONResponse({"status": "ok", "session": gateway.run_id})

    return Starlette(
        routes=[
            Route("/v1/chat/completions", gateway.chat, methods=["POST"]),
            Route("/v1/models", gateway.models, methods=["GET"]),
            Route("/gateway/stats", gateway.stats_view, methods=["GET"]),
            Route("/gateway/health", health, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
