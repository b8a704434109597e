"""``kind: tgi``: Hugging Face text-generation-inference, native ``POST /generate_stream``.

Wire format: SSE events ``data:{"index":N,"token":{"id":..,"text":..,"logprob":..,
"special":false},"generated_text":null,"details":null}``; the last event carries
``generated_text`` and, with ``details: true``, ``details.finish_reason`` and
``generated_tokens`` (and ``input_length`` in TGI 2.x). Special tokens (the EOS piece)
carry no text for the user and are not token events. The answer is finished when the
final event's ``details.finish_reason`` says why (``length``, ``eos_token``,
``stop_sequence``); a stream without it is incomplete, since ``details`` is asked for.
Errors mid-stream are ``data:{"error":"...","error_type":"..."}``; error answers are JSON
of the same shape (422 validation, 424 generation, 429 overloaded). Stream events carry no
id. TGI's timing headers (``x-queue-time`` and others, whole ms) come with the answer of
the non-streamed ``/generate`` only; where a server or a proxy sends ``x-queue-time`` on
the stream's answer too, it is the record's server queue (``workers/client/server_ids.py``).
"""

from __future__ import annotations

from typing import Any

import orjson

from scenarios.providers.base import join_url
from scenarios.providers.kinds import TGIProvider
from workers.client.adapters.base import AdapterContext, read_secret, register
from workers.client.adapters.post_stream import PostStreamAdapter
from workers.client.errors import IncompleteAnswer, RequestFailure, class_of_status, redact
from workers.client.finish import TGI_REASONS, finish_reason
from workers.client.result import RequestResult
from workers.client.server_ids import note_tgi_timings
from workers.client.sse import SSEDecoder
from workers.client.streaming import (
    Limits,
    json_headers,
    json_object,
    settle_counts,
    token_event,
)

# TGI's error_type values and the HTTP status it uses for each.
_ERROR_STATUS = {"overloaded": 429, "validation": 422, "generation": 424}


class TGIParser:
    """Interprets a ``/generate_stream`` SSE stream."""

    __slots__ = ("decoder", "ended", "events", "finished", "generated", "input_length", "result")

    def __init__(self, result: RequestResult) -> None:
        self.result = result
        self.decoder = SSEDecoder()
        self.ended = False  # saw the final event (generated_text or details)
        self.finished: str | None = None  # its details.finish_reason
        self.events = 0
        self.generated: int | None = None
        self.input_length: int | None = None

    def feed(self, chunk: bytes, stamp: int) -> None:
        """Interpret the events completed by ``chunk``."""
        for payload in self.decoder.feed(chunk):
            self._on_payload(payload, stamp)

    def _on_payload(self, payload: bytes, stamp: int) -> None:
        if payload == b"[DONE]" or not payload.strip():
            return
        message = json_object(payload)
        if "error" in message:
            raise tgi_error(message)
        token = message.get("token")
        if isinstance(token, dict) and token.get("text") and not token.get("special"):
            token_event(self.result, stamp, output=True)
            self.events += 1
        details = message.get("details")
        if isinstance(details, dict):
            self.ended = True
            self.finished = finish_reason(details.get("finish_reason"), TGI_REASONS)
            if isinstance(details.get("generated_tokens"), int):
                self.generated = details["generated_tokens"]
            if isinstance(details.get("input_length"), int):
                self.input_length = details["input_length"]
        elif message.get("generated_text") is not None:
            self.ended = True

    def finish(self, stamp: int) -> None:
        """Interpret an unterminated last event, check the answer finished, settle counts."""
        for payload in self.decoder.flush():
            self._on_payload(payload, stamp)
        if self.finished is None:
            what = "a final event without details.finish_reason" if self.ended else "no final event"
            raise IncompleteAnswer(f"stream ended after {self.events} token events with {what}")
        self.result.finish_reason = self.finished
        settle_counts(self.result, self.input_length, self.generated, self.events)


def tgi_error(message: dict[str, Any]) -> RequestFailure:
    """Failure of an error event sent with HTTP 200."""
    status = _ERROR_STATUS.get(str(message.get("error_type")), 500)
    return RequestFailure(
        class_of_status(status),
        redact(f"error event mid-stream ({message.get('error_type')}): {message.get('error')}"),
        status,
    )


def generate_body(prompt: str, max_new_tokens: int) -> bytes:
    """A ``/generate_stream`` request; ``details`` asks for the final token count."""
    return orjson.dumps(
        {"inputs": prompt, "parameters": {"max_new_tokens": max_new_tokens, "details": True}}
    )


@register("tgi")
async def tgi_adapter(provider: TGIProvider, context: AdapterContext) -> PostStreamAdapter:
    """Adapter of one TGI server."""
    key = read_secret(provider.api_key_env, provider.base_url, provider.name, context)
    return PostStreamAdapter(
        url=join_url(provider.base_url, "generate_stream"),
        headers=json_headers(key),
        limits=Limits.of(provider, key),
        retry=provider.retry,
        body=lambda request: generate_body(request.prompt, request.output_tokens),
        parser=TGIParser,
        on_headers=note_tgi_timings,
    )
