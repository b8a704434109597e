"""``kind: replicate``: Replicate predictions with streaming output.

A request is two HTTP calls, both inside the measured time (``sent`` is stamped before
the first): ``POST /v1/models/{owner}/{name}/predictions`` (or ``/v1/predictions`` with a
``version`` for ``owner/name:version``) answers 201 with ``urls.stream``; a ``GET`` of
that URL is an SSE stream of named events: ``output`` (plain-text token pieces),
``error`` (``{"detail": ...}``) and ``done`` (``{}``, or ``{"reason": "canceled"|"error"}``).
The stream has no token counts; after it ends (outside the measured time) the
prediction's ``metrics.input_token_count``/``output_token_count`` are read when present.
Replicate never says why an answer ended: a ``done`` event ends it (without one it is
incomplete) and the record's ``finish_reason`` stays NULL. The prediction's ``id`` is the
record's response id.

The stream and poll URLs come from the API's answer, so they are checked before the key
follows them: each must be http(s) (https when the API base is), on a host the key
variable is bound to (``workers/client/secrets.py``); the transport's egress guard then checks
the address it connects to. A URL that fails makes the request a ``protocol`` error row
and nothing is sent there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from scenarios.providers.base import RetryPolicy, join_url
from scenarios.providers.kinds import ReplicateProvider
from scenarios.security.egress import EgressDenied, url_host
from workers.client.adapters.base import AdapterContext, ProviderSetupError, read_secret, register
from workers.client.errors import (
    ErrorClass,
    IncompleteAnswer,
    ProtocolFailure,
    RequestFailure,
    redact,
)
from workers.client.result import RequestResult
from workers.client.secrets import Secrets, host_of
from workers.client.server_ids import note_response_id
from workers.client.sse_events import NamedSSEDecoder, SSEEvent
from workers.client.streaming import (
    HttpCall,
    Limits,
    json_headers,
    json_object,
    measure_request,
    read_json,
    settle_counts,
    token_event,
)
from workers.prompts.plan import PlannedRequest

# Reading the prediction's token counts after the stream is bookkeeping, not measurement;
# it gets a short deadline of its own so a slow API cannot hold up the next request.
METRICS_TIMEOUT_S = 10.0


class ReplicateParser:
    """Interprets a prediction's SSE stream."""

    __slots__ = ("decoder", "done", "events", "result")

    def __init__(self, result: RequestResult) -> None:
        self.result = result
        self.decoder = NamedSSEDecoder()
        self.done = False
        self.events = 0

    def feed(self, chunk: bytes, stamp: int) -> None:
        """Interpret the events completed by ``chunk``."""
        for event in self.decoder.feed(chunk):
            self._on_event(event, stamp)

    def _on_event(self, event: SSEEvent, stamp: int) -> None:
        if event.event == "output":
            if event.data:
                token_event(self.result, stamp, output=True)
                self.events += 1
        elif event.event == "error":
            detail = _detail(event.data)
            raise RequestFailure(ErrorClass.HTTP_5XX, redact(f"prediction error: {detail}"))
        elif event.event == "done":
            reason = json_object(event.data).get("reason") if event.data.strip() else None
            if reason in ("error", "canceled"):
                raise RequestFailure(ErrorClass.HTTP_5XX, f"prediction ended: {reason}")
            self.done = True

    def finish(self, stamp: int) -> None:
        """Interpret an unterminated last event, check the answer ended, count tokens."""
        for event in self.decoder.flush():
            self._on_event(event, stamp)
        if not self.done:
            raise IncompleteAnswer(
                f"stream ended after {self.events} token events without its done event"
            )
        settle_counts(self.result, None, None, self.events)


def _detail(data: bytes) -> str:
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError:
        return data.decode("utf-8", errors="replace")
    return str(message.get("detail", message)) if isinstance(message, dict) else str(message)


def create_call(base_url: str, model: str, prompt_input: dict[str, Any]) -> tuple[str, bytes]:
    """URL and body creating a prediction of ``owner/name`` or ``owner/name:version``."""
    name, _, version = model.partition(":")
    body: dict[str, Any] = {"input": prompt_input, "stream": True}
    if version:
        body["version"] = version
        return join_url(base_url, "predictions"), orjson.dumps(body)
    return join_url(base_url, f"models/{name}/predictions"), orjson.dumps(body)


@dataclass(frozen=True)
class ReplicateAdapter:
    """Measures streamed predictions of one model."""

    base_url: str
    model: str
    max_tokens_input: str
    extra_input: dict[str, Any]
    key: str
    limits: Limits
    retry: RetryPolicy | None
    provider: str
    variable: str
    secrets: Secrets

    def handed_back(self, url: Any, what: str) -> str:
        """A URL from the API's answer, if the key may follow it; else a protocol
        failure (and nothing is sent there)."""
        if not isinstance(url, str):
            raise ProtocolFailure(f"model {self.model} returned no {what} URL")
        try:
            scheme = url_host(url)[0]
            host = host_of(url)
        except EgressDenied as exc:
            raise ProtocolFailure(redact(f"{what} URL refused: {exc}")) from None
        if scheme != "https" and url_host(self.base_url)[0] == "https":
            raise ProtocolFailure(f"{what} URL on {host!r} is not https: the key stays unsent")
        try:
            self.secrets.check(self.variable, url, self.provider)
        except ProviderSetupError as exc:
            raise ProtocolFailure(redact(f"{what} URL refused: {exc}")) from None
        return url

    async def measure(
        self, http: httpx.AsyncClient, request: PlannedRequest, intended_start: int
    ) -> RequestResult:
        """Create a prediction, stream it, then read its token counts if it has them."""
        prompt_input = {
            **self.extra_input,
            "prompt": request.prompt,
            self.max_tokens_input: request.output_tokens,
        }
        url, body = create_call(self.base_url, self.model, prompt_input)
        headers = json_headers(self.key, accept="application/json")
        prediction: dict[str, Any] = {}

        async def prepare(client: httpx.AsyncClient) -> HttpCall:
            created = await read_json(client, "POST", url, self.limits, headers, body)
            prediction.clear()
            prediction.update(created)
            urls = created.get("urls")
            urls = urls if isinstance(urls, dict) else {}
            stream = self.handed_back(urls.get("stream"), "stream")
            if urls.get("get") is not None:
                self.handed_back(urls["get"], "poll")  # followed later, for the counts
            stream_headers = {
                "accept": "text/event-stream",
                "cache-control": "no-store",
                "authorization": f"Bearer {self.key}",
            }
            return HttpCall("GET", stream, stream_headers)

        result = await measure_request(
            http,
            prepare,
            ReplicateParser,
            self.limits,
            self.retry,
            intended_start,
        )
        note_response_id(result, prediction.get("id"))  # the prediction is the response
        if result.ok:
            await self._read_counts(http, prediction, result)
        return result

    async def _read_counts(
        self, http: httpx.AsyncClient, prediction: dict[str, Any], result: RequestResult
    ) -> None:
        urls = prediction.get("urls")
        get_url = urls.get("get") if isinstance(urls, dict) else None
        if not isinstance(get_url, str):
            return
        limits = Limits(
            METRICS_TIMEOUT_S, METRICS_TIMEOUT_S, METRICS_TIMEOUT_S, self.limits.secrets
        )
        try:
            final = await read_json(
                http, "GET", get_url, limits, json_headers(self.key, accept="application/json")
            )
        except (RequestFailure, httpx.HTTPError):
            return  # counts stay as counted from events; the measurement itself succeeded
        metrics = final.get("metrics")
        if isinstance(metrics, dict):
            prompt, output = metrics.get("input_token_count"), metrics.get("output_token_count")
            if isinstance(prompt, int) and isinstance(output, int):
                result.prompt_tokens, result.completion_tokens = prompt, output
                result.token_count_source = result.prompt_count_source = "usage"


@register("replicate")
async def replicate_adapter(
    provider: ReplicateProvider, context: AdapterContext
) -> ReplicateAdapter:
    """Adapter of one Replicate model."""
    key = read_secret(provider.api_key_env, provider.base_url, provider.name, context) or ""
    return ReplicateAdapter(
        base_url=provider.base_url,
        model=provider.model,
        max_tokens_input=provider.max_tokens_input,
        extra_input=dict(provider.input),
        key=key,
        limits=Limits.of(provider, key),
        retry=provider.retry,
        provider=provider.name,
        variable=provider.api_key_env,
        secrets=context.secrets,
    )
