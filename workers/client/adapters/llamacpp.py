"""``kind: llamacpp``: llama.cpp ``llama-server``, native ``POST /completion`` streaming.

Wire format: SSE ``data: {"content":"...","stop":false,...}`` per token; the last event
has ``"stop":true``, ``tokens_predicted``, ``tokens_evaluated`` and ``timings``
(``prompt_n``, ``prompt_ms``, ``predicted_n``, ``predicted_ms``, ...). The server's own
prompt and decode times are recorded beside the client's stamps (``server_prompt_ns``,
``server_decode_ns``): their difference from TTFT and decode time is the queueing and
transport the server does not see. The prompt time is also the server's time to first
token (``server_ttft_ns``, source ``llamacpp``): llama-server samples the first token at
the end of the prompt's evaluation, and counts from the moment a slot took the request,
so a wait for a free slot is not in it (nor anywhere in ``timings``: the server queue
stays unknown). ``/completion`` events carry no id. The final event says why the answer ended:
``stop_type`` (``eos``, ``word``, ``limit``; ``none`` when none of them) or, on servers
before it, ``stopped_eos``/``stopped_word``/``stopped_limit``; a final event without a
reason is an incomplete answer. A mid-stream error arrives as a non-standard
``error: {json}`` line (older servers) or ``data: {"error": {...}}``; error answers are
``{"error": {"code": N, "message": "...", "type": "..."}}``. ``enforce_output_length``
sends ``ignore_eos`` (``n_predict`` is already the planned length; llama-server has no
``min_tokens``), and ``extra_body`` is merged into every body.
"""

from __future__ import annotations

from typing import Any

import orjson

from scenarios.providers.base import join_url
from scenarios.providers.kinds import LlamaCppProvider
from workers.client.adapters.base import AdapterContext, read_secret, register
from workers.client.adapters.post_stream import PostStreamAdapter
from workers.client.errors import (
    IncompleteAnswer,
    RequestFailure,
    class_of_status,
    redact,
)
from workers.client.finish import LLAMACPP_STOP_TYPES, finish_reason
from workers.client.result import RequestResult
from workers.client.sse_events import NamedSSEDecoder, SSEEvent
from workers.client.streaming import (
    Limits,
    json_headers,
    json_object,
    settle_counts,
    token_event,
)
from workers.prompts.plan import PlannedRequest

# Flags of servers before ``stop_type``, in the order llama-server checks them.
_STOP_FLAGS = (("stopped_eos", "eos"), ("stopped_word", "word"), ("stopped_limit", "limit"))


class LlamaCppParser:
    """Interprets a ``/completion`` SSE stream, keeping the server's timings."""

    __slots__ = ("decoder", "evaluated", "events", "predicted", "reason", "result", "stopped")

    def __init__(self, result: RequestResult) -> None:
        self.result = result
        self.decoder = NamedSSEDecoder()
        self.stopped = False  # saw the final stop:true event
        self.reason: str | None = None
        self.events = 0
        self.evaluated: int | None = None
        self.predicted: int | None = None

    def feed(self, chunk: bytes, stamp: int) -> None:
        """Interpret the events completed by ``chunk``."""
        for event in self.decoder.feed(chunk):
            self._on_event(event, stamp)

    def _on_event(self, event: SSEEvent, stamp: int) -> None:
        if event.data == b"[DONE]" or not event.data.strip():
            return
        message = json_object(event.data)
        if event.event == "error":
            raise llamacpp_error(message)
        if "error" in message:
            raise llamacpp_error(message["error"])
        if message.get("content"):
            token_event(self.result, stamp, output=True)
            self.events += 1
        if message.get("stop") is True:
            self.stopped = True
            self._on_final(message)

    def _on_final(self, message: dict[str, Any]) -> None:
        stop_type = message.get("stop_type")
        if stop_type is None:
            stop_type = next(
                (kind for flag, kind in _STOP_FLAGS if message.get(flag) is True), None
            )
        if stop_type != "none":
            self.reason = finish_reason(stop_type, LLAMACPP_STOP_TYPES)
        if isinstance(message.get("tokens_predicted"), int):
            self.predicted = message["tokens_predicted"]
        if isinstance(message.get("tokens_evaluated"), int):
            self.evaluated = message["tokens_evaluated"]
        timings = message.get("timings")
        if isinstance(timings, dict):
            prompt_ns = _duration_ns(timings.get("prompt_ms"))
            if prompt_ns is not None:
                self.result.server_prompt_ns = self.result.server_ttft_ns = prompt_ns
                self.result.server_timing_source = "llamacpp"
            self.result.server_decode_ns = _duration_ns(timings.get("predicted_ms"))

    def finish(self, stamp: int) -> None:
        """Interpret an unterminated last event, check the answer finished, settle counts."""
        for event in self.decoder.flush():
            self._on_event(event, stamp)
        if not self.stopped:
            raise IncompleteAnswer(
                f"stream ended after {self.events} token events without its stop:true event"
            )
        if self.reason is None:
            raise IncompleteAnswer(
                f"final event after {self.events} token events gives no stop reason "
                "(stop_type none or missing)"
            )
        self.result.finish_reason = self.reason
        settle_counts(self.result, self.evaluated, self.predicted, self.events)


# A timing longer than a day is not a timing of one request.
_MAX_MS = 86_400_000.0


def _duration_ns(ms: Any) -> int | None:
    """A number of milliseconds a request can take, as ns; None for anything else
    (negative, huge, NaN, a string, or a bool, which JSON decoding makes an int)."""
    if isinstance(ms, int | float) and not isinstance(ms, bool) and 0 <= ms <= _MAX_MS:
        return round(ms * 1e6)
    return None


def llamacpp_error(error: Any) -> RequestFailure:
    """Failure of an error object sent with HTTP 200."""
    code = error.get("code") if isinstance(error, dict) else None
    message = error.get("message", error) if isinstance(error, dict) else error
    status = code if isinstance(code, int) and 400 <= code <= 599 else None
    return RequestFailure(
        class_of_status(status or 500), redact(f"error event mid-stream: {message}"), status
    )


def completion_body(
    request: PlannedRequest,
    cache_prompt: bool,
    enforce_output_length: bool = False,
    extra_body: dict[str, Any] | None = None,
) -> bytes:
    """A streaming ``/completion`` request of the planned output length (``n_predict``);
    ``ignore_eos`` with ``enforce_output_length``, then ``extra_body`` merged in."""
    body: dict[str, Any] = {
        "prompt": request.prompt,
        "n_predict": request.output_tokens,
        "stream": True,
        "cache_prompt": cache_prompt,
    }
    if enforce_output_length:
        body["ignore_eos"] = True
    if extra_body:
        body.update(extra_body)
    return orjson.dumps(body)


@register("llamacpp")
async def llamacpp_adapter(
    provider: LlamaCppProvider, context: AdapterContext
) -> PostStreamAdapter:
    """Adapter of one llama-server."""
    key = read_secret(provider.api_key_env, provider.base_url, provider.name, context)
    cache, enforce, extra = (
        provider.cache_prompt,
        provider.enforce_output_length,
        provider.extra_body,
    )
    return PostStreamAdapter(
        url=join_url(provider.base_url, "completion"),
        headers=json_headers(key),
        limits=Limits.of(provider, key),
        retry=provider.retry,
        body=lambda request: completion_body(request, cache, enforce, extra),
        parser=LlamaCppParser,
    )
