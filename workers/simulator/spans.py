"""The simulator's OTLP trace spans: one vLLM-style ``llm_request`` span per streamed
chat answer, exported in the background to ``otlp_traces_url`` (docs/traces.md).

A span carries vLLM's attribute names (``gen_ai.request.id`` equal to the stream's
``id``, ``gen_ai.latency.*`` in seconds) and names its provider by ``service.name``
(``otlp_service_name``). Its times are the server's own: arrival when the answer
started, scheduled when the batching model admitted the request (the fixed model has no
queue: scheduled at arrival), first and last token when they were written.

Exporting never slows a stream: :meth:`SpanExporter.add` appends to a bounded queue
(spans past it are counted and dropped); a background task posts batches as protobuf,
encoding them off the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time
from collections import deque
from contextvars import ContextVar
from dataclasses import dataclass

import httpx

from scenarios.providers.simulate import SimulateSpec
from scenarios.wire.otlp import (
    E2E,
    REQUEST_ID,
    TIME_IN_DECODE,
    TIME_IN_PREFILL,
    TIME_IN_QUEUE,
    TIME_TO_FIRST_TOKEN,
    EncodedSpan,
    Scalar,
    encode_request,
)

log = logging.getLogger("tokenbench.simulator")

BATCH = 512  # spans per export request, as OpenTelemetry's batch processor
MAX_PENDING = 8192  # spans waiting for export; more are dropped (and counted)
INTERVAL_S = 0.5
TIMEOUT_S = 5.0


@dataclass(slots=True)
class RequestTiming:
    """One answer's server-side times (``perf_counter`` seconds)."""

    arrival: float
    queued: float | None = None
    scheduled: float | None = None
    first_token: float | None = None
    last_token: float | None = None
    unix_start_ns: int = 0

    def token(self) -> None:
        """A token-bearing event is written now."""
        now = time.perf_counter()
        if self.first_token is None:
            self.first_token = now
        self.last_token = now


_TIMING: ContextVar[RequestTiming | None] = ContextVar("simulator_span_timing", default=None)


def current_timing() -> RequestTiming | None:
    """The timing of the answer the running task streams, if its endpoint exports spans."""
    return _TIMING.get()


class SpanExporter:
    """Spans of one endpoint, posted in batches to an OTLP/HTTP traces URL."""

    def __init__(self, url: str, token: str | None, service: str) -> None:
        self.url = url
        self.headers = {"content-type": "application/x-protobuf"}
        if token:
            self.headers["authorization"] = f"Bearer {token}"
        self.resource: dict[str, Scalar] = {"service.name": service}
        self.pending: deque[EncodedSpan] = deque()
        self.exported = 0
        self.dropped = 0
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def from_spec(cls, spec: SimulateSpec) -> SpanExporter | None:
        """The exporter a ``simulate`` block asks for, or None."""
        if spec.otlp_traces_url is None:
            return None
        token = os.environ.get(spec.otlp_token_env) if spec.otlp_token_env else None
        return cls(spec.otlp_traces_url, token, spec.otlp_service_name or "simulated")

    def begin(self) -> RequestTiming:
        """Start timing the answer of the running task (read by the latency model)."""
        timing = RequestTiming(time.perf_counter(), unix_start_ns=time.time_ns())
        _TIMING.set(timing)
        return timing

    def finish(self, request_id: str, timing: RequestTiming) -> None:
        """Queue the span of a finished answer (O(1): never waits for the network)."""
        _TIMING.set(None)
        first, last = timing.first_token, timing.last_token
        if first is None or last is None:
            return
        queued = timing.queued if timing.queued is not None else timing.arrival
        scheduled = timing.scheduled if timing.scheduled is not None else queued
        attributes: dict[str, Scalar] = {
            REQUEST_ID: request_id,
            TIME_IN_QUEUE: max(0.0, scheduled - queued),
            TIME_TO_FIRST_TOKEN: first - timing.arrival,
            TIME_IN_PREFILL: max(0.0, first - scheduled),
            TIME_IN_DECODE: last - first,
            E2E: last - timing.arrival,
        }
        end_ns = timing.unix_start_ns + round((last - timing.arrival) * 1e9)
        span = EncodedSpan(
            secrets.token_bytes(16), secrets.token_bytes(8), "llm_request",
            timing.unix_start_ns, end_ns, attributes,
        )  # fmt: skip
        if len(self.pending) >= MAX_PENDING:
            self.dropped += 1
            return
        self.pending.append(span)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        async with httpx.AsyncClient(timeout=TIMEOUT_S) as client:
            while True:
                await asyncio.sleep(INTERVAL_S)
                while self.pending:
                    batch = [self.pending.popleft() for _ in range(min(BATCH, len(self.pending)))]
                    await self._post(client, batch)

    async def _post(self, client: httpx.AsyncClient, batch: list[EncodedSpan]) -> None:
        body = await asyncio.to_thread(encode_request, self.resource, batch)
        try:
            answer = await client.post(self.url, content=body, headers=self.headers)
        except httpx.HTTPError as exc:
            self.dropped += len(batch)
            log.warning("simulator: span export failed: %s", type(exc).__name__)
            return
        if answer.status_code != 200:
            self.dropped += len(batch)
            log.warning("simulator: span export answered %d", answer.status_code)
            return
        self.exported += len(batch)

    async def close(self) -> None:
        """Stop the background task (spans still queued are not sent)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def new_response_id() -> str:
    """A stream's ``id``: as long as ``RESPONSE_ID_PLACEHOLDER``, unique per answer."""
    return "chatcmpl-sim-" + secrets.token_hex(8)


# The id in the pre-encoded chunks, replaced per answer as they are written (same length,
# so chunk sizes and content-length stay right).
RESPONSE_ID_PLACEHOLDER = "chatcmpl-sim-" + "0" * 16
