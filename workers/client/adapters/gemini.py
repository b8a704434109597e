"""``kind: gemini``: Google's Gemini API,
``POST {base_url}/v1beta/models/{model}:streamGenerateContent?alt=sse``.

Wire format (the Gemini API reference): SSE ``data:`` events, each a
``GenerateContentResponse``: ``candidates[0].content.parts[]`` with ``text`` (answer text,
or a thought summary when the part says ``thought: true``: reasoning, counted for TTFT
but not the first output token) or a whole ``functionCall`` (a tool call); the candidate's
``finishReason`` (``STOP``, ``MAX_TOKENS``, ``SAFETY``, ...) on the last event, and
``usageMetadata`` (``promptTokenCount``, which includes ``cachedContentTokenCount``;
``candidatesTokenCount``; ``thoughtsTokenCount``) and ``responseId``. There is no
``[DONE]``: the answer is finished when a finish reason came. The recorded completion is
``candidatesTokenCount + thoughtsTokenCount`` (thinking is generated output, as the other
dialects count it), ``reasoning_tokens`` the thoughts. A prompt blocked before any
candidate (``promptFeedback.blockReason``) is ``content_filter``. An error mid-stream is
``{"error": {"code": N, "message": ..., "status": ...}}``. The key travels in the
``x-goog-api-key`` header, never in the URL; Gemini sends no request-id header that the
docs name, so ``server_request_id`` stays unknown.
"""

from __future__ import annotations

from typing import Any

import orjson

from scenarios.providers.base import join_url
from scenarios.providers.kinds import GeminiProvider
from workers.client.adapters.base import AdapterContext, read_secret, register
from workers.client.adapters.post_stream import PostStreamAdapter
from workers.client.finish import GEMINI_REASONS, finish_reason
from workers.client.native_stream import (
    NativeStream,
    conversation,
    event_failure,
    forced_tool,
    function_tools,
)
from workers.client.result import RequestResult
from workers.client.sse import SSEDecoder
from workers.client.streaming import Limits, counted, json_headers, json_object
from workers.prompts.plan import PlannedRequest


class GeminiParser:
    """Interprets a ``streamGenerateContent?alt=sse`` stream."""

    __slots__ = ("calls", "decoder", "stream")

    def __init__(self, result: RequestResult) -> None:
        self.stream = NativeStream(result)
        self.decoder = SSEDecoder()
        self.calls = 0  # functionCall parts seen (each is one whole call)

    def feed(self, chunk: bytes, stamp: int) -> None:
        """Interpret the events completed by ``chunk``."""
        for payload in self.decoder.feed(chunk):
            self._on_payload(payload, stamp)

    def _on_payload(self, payload: bytes, stamp: int) -> None:
        if payload == b"[DONE]" or not payload.strip():
            return
        message = json_object(payload)
        stream = self.stream
        error = message.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            status = code if isinstance(code, int) and 400 <= code <= 599 else 500
            raise event_failure(status, error.get("status"), error.get("message"))
        stream.response_id(message.get("responseId"))
        candidates = message.get("candidates")
        candidate = candidates[0] if isinstance(candidates, list) and candidates else None
        if isinstance(candidate, dict):
            self._on_candidate(candidate, stamp)
        feedback = message.get("promptFeedback")
        if isinstance(feedback, dict) and feedback.get("blockReason"):
            stream.finished = "content_filter"
        usage = message.get("usageMetadata")
        if isinstance(usage, dict):
            self._on_usage(usage)

    def _on_candidate(self, candidate: dict[str, Any], stamp: int) -> None:
        stream = self.stream
        content = candidate.get("content")
        parts = content.get("parts") if isinstance(content, dict) else None
        token = output = False  # an event of several parts is one token event
        for part in parts if isinstance(parts, list) else []:
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("functionCall"), dict):
                stream.tool_call(stamp, self.calls, emit=False)
                self.calls += 1
                token = output = True
            else:
                is_output = part.get("thought") is not True
                if stream.text(stamp, part.get("text"), output=is_output, emit=False):
                    token, output = True, output or is_output
        if token:
            stream.event(stamp, output=output)
        reason = finish_reason(candidate.get("finishReason"), GEMINI_REASONS)
        if reason is not None:
            stream.ended = True
            # A STOP after a function call: the answer ended to call it.
            stream.finished = "tool_calls" if reason == "stop" and self.calls else reason

    def _on_usage(self, usage: dict[str, Any]) -> None:
        stream = self.stream
        prompt = counted(usage.get("promptTokenCount"))
        candidates = counted(usage.get("candidatesTokenCount"))
        thoughts = counted(usage.get("thoughtsTokenCount"))
        if prompt is not None:
            stream.prompt = prompt
        if candidates is not None:
            stream.completion = candidates + (thoughts or 0)
        if thoughts is not None:
            stream.result.reasoning_tokens = thoughts
        stream.cache(counted(usage.get("cachedContentTokenCount")))

    def finish(self, stamp: int) -> None:
        """Interpret an unterminated last event, check the answer finished, settle counts."""
        for payload in self.decoder.flush():
            self._on_payload(payload, stamp)
        self.stream.finish("finishReason")


def gemini_tool_config(tool_choice: str | dict[str, Any]) -> dict[str, Any]:
    """An OpenAI-style ``tool_choice`` as Gemini's ``functionCallingConfig``."""
    name = forced_tool(tool_choice)
    if name is not None:
        return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [name]}}
    mode = {"required": "ANY", "none": "NONE"}.get(str(tool_choice), "AUTO")
    return {"functionCallingConfig": {"mode": mode}}


def generate_content_body(
    request: PlannedRequest,
    include_thoughts: bool = False,
    extra_body: dict[str, Any] | None = None,
) -> bytes:
    """A ``streamGenerateContent`` request of the planned output length
    (``generationConfig.maxOutputTokens``); ``extra_body`` merged last, its own
    ``generationConfig`` keys into ours."""
    system, turns = conversation(request)
    generation: dict[str, Any] = {"maxOutputTokens": request.output_tokens}
    if include_thoughts:
        generation["thinkingConfig"] = {"includeThoughts": True}
    body: dict[str, Any] = {
        "contents": [
            {"role": "model" if role == "assistant" else "user", "parts": [{"text": text}]}
            for role, text in turns
        ],
        "generationConfig": generation,
    }
    if system is not None:
        body["systemInstruction"] = {"parts": [{"text": system}]}
    if request.tools is not None:
        body["tools"] = [{"functionDeclarations": function_tools(request.tools.tools)}]
        body["toolConfig"] = gemini_tool_config(request.tools.tool_choice)
    if extra_body:
        extra = dict(extra_body)
        more = extra.pop("generationConfig", None)
        if isinstance(more, dict):
            generation.update(more)
        body.update(extra)
    return orjson.dumps(body)


def gemini_headers(key: str | None) -> dict[str, str]:
    """JSON headers with the key in ``x-goog-api-key`` (never a URL query: URLs end up in
    logs and error messages)."""
    headers = json_headers(None)
    if key:
        headers["x-goog-api-key"] = key
    return headers


@register("gemini")
async def gemini_adapter(provider: GeminiProvider, context: AdapterContext) -> PostStreamAdapter:
    """Adapter of the Gemini API at ``base_url``."""
    key = read_secret(provider.api_key_env, provider.base_url, provider.name, context)
    thoughts, extra = provider.include_thoughts, provider.extra_body
    return PostStreamAdapter(
        url=join_url(provider.base_url, f"v1beta/models/{provider.model}:streamGenerateContent")
        + "?alt=sse",
        headers=gemini_headers(key),
        limits=Limits.of(provider, key),
        retry=provider.retry,
        body=lambda request: generate_content_body(request, thoughts, extra),
        parser=GeminiParser,
        model=provider.model,
    )
