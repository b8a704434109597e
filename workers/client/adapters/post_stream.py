"""The adapter shape most dialects share: POST a body built from the planned request to
one URL, and read the streamed answer with the dialect's parser.

Dialects differ in their body and their parser only; URL, headers, deadlines and the
opt-in 429 retries are the same, so one adapter class serves chat, completions, TGI and
llama.cpp (Bedrock signs each request and Replicate makes two calls: they keep their own).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import httpx

from scenarios.providers.base import RetryPolicy
from workers.client.request_ids import REQUEST_ID_HEADER
from workers.client.result import RequestResult
from workers.client.streaming import (
    HttpCall,
    Limits,
    OnHeaders,
    StreamParser,
    measure_request,
    own_size,
)
from workers.prompts.plan import PlannedRequest


@dataclass(frozen=True)
class PostStreamAdapter:
    """Measures one streaming endpoint: ``body(request)`` POSTed to ``url``, the answer
    interpreted by ``parser``."""

    url: str
    headers: dict[str, str]
    limits: Limits
    retry: RetryPolicy | None
    body: Callable[[PlannedRequest], bytes]
    parser: Callable[[RequestResult], StreamParser]
    model: str | None = None  # the model id the body names, where the dialect has one
    on_headers: OnHeaders | None = None  # the dialect's own response headers (TGI's timings)

    async def measure(
        self, http: httpx.AsyncClient, request: PlannedRequest, intended_start: int
    ) -> RequestResult:
        """One measured streaming request (retried on 429 only if the provider opts in);
        a session's turn keeps its answer's text for the next turn."""
        headers = self.headers
        if request.request_id is not None:  # found again in the upstreams' logs
            headers = {**headers, REQUEST_ID_HEADER: request.request_id}
        return await measure_request(
            http,
            HttpCall("POST", self.url, headers, own_size(self.body(request))),
            self.parser,
            self.limits,
            self.retry,
            intended_start,
            answer_chars=0 if request.session is None else request.session.answer_chars,
            on_headers=self.on_headers,
        )
