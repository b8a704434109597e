"""``kind: bedrock``: AWS Bedrock ``ConverseStream``.

``POST {endpoint}/model/{modelId}/converse-stream`` with a JSON body, signed with SigV4
(service ``bedrock``) by botocore's signer, or sent with a Bedrock API key as a bearer
token. The answer is binary ``application/vnd.amazon.eventstream``: length-prefixed,
CRC-checked frames whose headers name the event (``:message-type`` event|exception,
``:event-type`` messageStart, contentBlockDelta, contentBlockStop, messageStop,
metadata). Frames are parsed incrementally by botocore's ``EventStreamBuffer`` as bytes
arrive; a frame is stamped with the arrival of the chunk that completed it. Usage comes
from the ``metadata`` event; ``messageStop.stopReason`` says why the answer ended (a stream
without it is incomplete). Exceptions mid-stream (``throttlingException``,
``modelStreamErrorException``, ...) map to the HTTP status AWS documents for each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import orjson
from botocore.auth import SigV4Auth  # type: ignore[import-untyped]
from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]
from botocore.credentials import Credentials  # type: ignore[import-untyped]
from botocore.eventstream import EventStreamBuffer, ParserError  # type: ignore[import-untyped]

from scenarios.providers.base import RetryPolicy, join_url
from scenarios.providers.kinds import BedrockProvider
from scenarios.security.egress import BEDROCK_DEFAULT_ENDPOINT
from workers.client.adapters.base import AdapterContext, read_secret, register
from workers.client.errors import (
    IncompleteAnswer,
    ProtocolFailure,
    RequestFailure,
    class_of_status,
    redact,
)
from workers.client.finish import BEDROCK_REASONS, finish_reason
from workers.client.result import RequestResult
from workers.client.streaming import (
    HttpCall,
    Limits,
    json_headers,
    json_object,
    measure_request,
    own_size,
    settle_counts,
    token_event,
)
from workers.prompts.plan import PlannedRequest

EVENTSTREAM = "application/vnd.amazon.eventstream"

# HTTP status of each ConverseStream exception event (AWS API reference, ConverseStreamOutput).
EXCEPTION_STATUS = {
    "internalServerException": 500,
    "modelStreamErrorException": 424,
    "serviceUnavailableException": 503,
    "throttlingException": 429,
    "validationException": 400,
}


class BedrockParser:
    """Interprets a ConverseStream event stream."""

    __slots__ = ("buffer", "events", "input_tokens", "output_tokens", "reason", "result", "stopped")

    def __init__(self, result: RequestResult) -> None:
        self.result = result
        self.buffer = EventStreamBuffer()
        self.stopped = False  # saw messageStop
        self.reason: str | None = None  # its stopReason
        self.events = 0
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None

    def feed(self, chunk: bytes, stamp: int) -> None:
        """Interpret every frame completed by ``chunk``."""
        self.buffer.add_data(chunk)
        try:
            for message in self.buffer:
                self._on_frame(message.headers, message.payload, stamp)
        except ParserError as exc:
            raise ProtocolFailure(f"bad event-stream frame: {type(exc).__name__}: {exc}") from None

    def _on_frame(self, headers: dict[str, Any], payload: bytes, stamp: int) -> None:
        kind = headers.get(":message-type")
        if kind == "exception":
            name = str(headers.get(":exception-type"))
            status = EXCEPTION_STATUS.get(name, 500)
            detail = json_object(payload).get("message", "") if payload else ""
            raise RequestFailure(
                class_of_status(status), redact(f"{name} mid-stream: {detail}"), status
            )
        if kind == "error":
            code, text = headers.get(":error-code"), headers.get(":error-message")
            raise RequestFailure(class_of_status(500), redact(f"stream error {code}: {text}"))
        event = headers.get(":event-type")
        if event == "contentBlockDelta":
            delta = json_object(payload).get("delta")
            if isinstance(delta, dict):
                if delta.get("text"):
                    self._token(stamp, output=True)
                else:
                    reasoning = delta.get("reasoningContent")
                    if isinstance(reasoning, dict) and reasoning.get("text"):
                        self._token(stamp, output=False)
        elif event == "messageStop":
            self.stopped = True
            stop = json_object(payload).get("stopReason") if payload else None
            self.reason = finish_reason(stop, BEDROCK_REASONS)
        elif event == "metadata":
            usage = json_object(payload).get("usage")
            if isinstance(usage, dict):
                prompt, output = usage.get("inputTokens"), usage.get("outputTokens")
                if isinstance(prompt, int) and isinstance(output, int):
                    self.input_tokens, self.output_tokens = prompt, output

    def _token(self, stamp: int, *, output: bool) -> None:
        token_event(self.result, stamp, output=output)
        self.events += 1

    def finish(self, stamp: int) -> None:
        """Check the answer ended with messageStop and its reason; settle counts."""
        if self.reason is None:
            what = "messageStop without a stopReason" if self.stopped else "no messageStop"
            raise IncompleteAnswer(f"stream ended after {self.events} token events with {what}")
        self.result.finish_reason = self.reason
        settle_counts(self.result, self.input_tokens, self.output_tokens, self.events)


def converse_body(prompt: str, max_tokens: int) -> bytes:
    """A one-turn ConverseStream request bounded by ``maxTokens``."""
    return orjson.dumps(
        {
            "messages": [{"role": "user", "content": [{"text": prompt}]}],
            "inferenceConfig": {"maxTokens": max_tokens},
        }
    )


@dataclass(frozen=True)
class SigV4:
    """AWS credentials of one worker, kept in memory only."""

    access_key_id: str
    secret_access_key: str
    session_token: str | None
    region: str

    def sign(self, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        """``headers`` plus Authorization, X-Amz-Date (and the session token header)."""
        request = AWSRequest(method="POST", url=url, data=body, headers=headers)
        credentials = Credentials(self.access_key_id, self.secret_access_key, self.session_token)
        SigV4Auth(credentials, "bedrock", self.region).add_auth(request)
        return {str(name): str(value) for name, value in request.headers.items()}


@dataclass(frozen=True)
class BedrockAdapter:
    """Measures ConverseStream of one model."""

    url: str
    limits: Limits
    retry: RetryPolicy | None
    signer: SigV4 | None
    api_key: str | None

    async def measure(
        self, http: httpx.AsyncClient, request: PlannedRequest, intended_start: int
    ) -> RequestResult:
        """One measured request; signing happens after ``sent`` (it is client time)."""
        body = own_size(converse_body(request.prompt, request.output_tokens))

        async def prepare(_: httpx.AsyncClient) -> HttpCall:
            headers = json_headers(self.api_key, accept=EVENTSTREAM)
            if self.signer is not None:
                headers = self.signer.sign(self.url, headers, body)
            return HttpCall("POST", self.url, headers, body)

        return await measure_request(
            http,
            prepare,
            BedrockParser,
            self.limits,
            self.retry,
            intended_start,
        )


def converse_stream_url(provider: BedrockProvider) -> str:
    """``{endpoint}/model/{modelId}/converse-stream``.

    The URL signed must be the URL on the wire. The aiohttp transport normalises ``%3A``
    back to ``:`` (legal in a path) but keeps ``%2F``, so ``:`` of model versions stays
    literal and ``/`` of ARNs is encoded; SigV4 then encodes the path once more, as the
    service does with what it receives.
    """
    endpoint = provider.endpoint_url or BEDROCK_DEFAULT_ENDPOINT.format(region=provider.region)
    return join_url(endpoint, f"model/{quote(provider.model, safe=':')}/converse-stream")


@register("bedrock")
async def bedrock_adapter(provider: BedrockProvider, context: AdapterContext) -> BedrockAdapter:
    """Adapter of one Bedrock model; credentials come from the worker's secret lookup,
    each variable only if it is bound to the endpoint's host (the key id travels in the
    signature's ``Credential=`` field, so it is a secret here too)."""
    url = converse_stream_url(provider)
    if provider.api_key_env:
        key = read_secret(provider.api_key_env, url, provider.name, context)
        return BedrockAdapter(url, Limits.of(provider, key), provider.retry, None, key)
    access = read_secret(provider.access_key_id_env, url, provider.name, context) or ""
    secret = read_secret(provider.secret_access_key_env, url, provider.name, context) or ""
    token = read_secret(provider.session_token_env, url, provider.name, context)
    signer = SigV4(access, secret, token, provider.region)
    limits = Limits.of(provider, access, secret, token)
    return BedrockAdapter(url, limits, provider.retry, signer, None)
