"""One fake HTTP server speaking every provider dialect, replaying recorded wire bytes.

It runs aiohttp on a free loopback port in a background thread, so both in-process
adapter tests and worker processes can reach it. The first path segments select a
behaviour: ``/s/{scenario}/...`` with scenario ``ok``, ``ratelimit`` (always 429),
``ratelimit-once*`` (429 on the first request of each such scenario and dialect, then
ok), ``quota``,
``midstream`` (an error after the first token), ``cut`` (the connection ends after the
first event), ``tool`` (the hosted dialects' tool-call streams), ``incomplete`` (a
Responses answer cut at ``max_output_tokens``), ``overloaded`` (Anthropic's 529),
``nousage`` (OpenAI chat as llama-cpp-python's server streams it: a
finish_reason but no usage chunk), ``nofinish`` (chat and completions streams whose
finish_reason never comes, then ``[DONE]``), ``timed`` (TGI with its timing headers on the
stream's answer). Model ``missing`` gets the dialect's not-found answer. Credentials are
checked as the real services do (bearer token, Azure ``api-key``, Anthropic ``x-api-key``
with ``anthropic-version``, Gemini ``x-goog-api-key`` (a ``key=`` in the URL is refused),
Bedrock SigV4 signature recomputed with botocore), and refused with the recorded auth
errors. Streamed answers carry the request id header each service sends (Anthropic and
Responses answers ``request-id`` / ``x-request-id`` of ``FAKE_REQUEST_ID``).

Bodies are written event by event with a short pause between, so the client sees
events arrive in separate reads, as from a real generating server.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.fakes.eventstream import recorded_frames

DATA = Path(__file__).resolve().parent.parent / "data" / "providers"
KEY = "fake-key-0123456789abcdef"
AWS_ACCESS_KEY_ID = "AKIAFAKE00EXAMPLE000"
AWS_SECRET_ACCESS_KEY = "fake+secret/access0key0for0tests00000000"
AWS_REGION = "us-east-1"
EVENT_GAP_S = 0.003
FAKE_REQUEST_ID = "req_fake_0123456789"
# The request id header each service sends with a streamed answer (docs/providers.md,
# "Ids and server timings"); TGI's scenario ``timed`` adds its queue-time header.
ID_HEADERS = {
    "openai": {"x-request-id": "req_openai_1"},
    "completions": {"x-request-id": "req_completions_1"},
    "azure": {"apim-request-id": "apim-azure-1", "x-request-id": "req_azure_1"},
    "bedrock": {"x-amzn-requestid": "amzn-bedrock-1"},
}
TGI_TIMINGS = {"x-queue-time": "17", "x-inference-time": "40", "x-total-time": "58"}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def data(path: str) -> bytes:
    """Bytes of a recorded file under tests/data/providers."""
    return (DATA / path).read_bytes()


def sse_events(body: bytes) -> list[bytes]:
    """Split a recorded SSE body into its events, each with its blank-line terminator
    (``\n\n``, or ``\r\n\r\n`` as sse-starlette servers write)."""
    separator = b"\r\n\r\n" if b"\r\n\r\n" in body else b"\n\n"
    return [part + separator for part in body.split(separator) if part]


class FakeProviders:
    """The server and what it saw."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.requests: list[dict[str, Any]] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def url(self, scenario: str, suffix: str = "") -> str:
        """Base URL selecting ``scenario``."""
        return f"{self.base}/s/{scenario}{suffix}"

    def start(self) -> FakeProviders:
        """Bind a free port and serve in the background thread."""
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    async def _start(self) -> None:
        app = web.Application()
        routes = [
            ("POST", "/s/{sc}/v1/chat/completions", self.openai_chat),
            ("POST", "/s/{sc}/v1/completions", self.openai_completions),
            ("POST", "/s/{sc}/openai/deployments/{deployment}/chat/completions", self.azure),
            ("POST", "/s/{sc}/model/{model}/converse-stream", self.bedrock),
            ("POST", "/s/{sc}/generate_stream", self.tgi),
            ("POST", "/s/{sc}/completion", self.llamacpp),
            ("POST", "/s/{sc}/v1/models/{owner}/{name}/predictions", self.replicate_create),
            ("POST", "/s/{sc}/v1/predictions", self.replicate_create),
            ("GET", "/s/{sc}/stream/{id}", self.replicate_stream),
            ("GET", "/s/{sc}/v1/predictions/{id}", self.replicate_get),
            ("POST", "/s/{sc}/v1/messages", self.anthropic),
            ("POST", "/s/{sc}/v1/responses", self.openai_responses),
            ("POST", "/s/{sc}/v1beta/models/{call}", self.gemini),
        ]
        for method, path, handler in routes:
            app.router.add_route(method, path, handler)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.SockSite(self._runner, sock).start()

    def stop(self) -> None:
        """Stop serving and end the thread."""
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    # ------------------------------------------------------------------ helpers

    def _first(self, request: web.Request, dialect: str) -> bool:
        """Count this request; True if it is the first of its scenario and dialect."""
        key = f"{request.match_info['sc']}:{dialect}"
        self.hits[key] += 1
        return self.hits[key] == 1

    async def _record(self, request: web.Request) -> bytes:
        body = await request.read()
        self.requests.append(
            {"path": request.raw_path, "headers": dict(request.headers), "body": body}
        )
        return body

    def _rate_limited(self, request: web.Request, dialect: str) -> bool:
        scenario = request.match_info["sc"]
        first = self._first(request, dialect)
        return scenario == "ratelimit" or (scenario.startswith("ratelimit-once") and first)

    @staticmethod
    async def _stream(
        request: web.Request,
        pieces: list[bytes],
        content_type: str,
        cut: bool = False,
        headers: dict[str, str] | None = None,
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"content-type": content_type, **(headers or {})})
        await response.prepare(request)
        for index, piece in enumerate(pieces):
            if index:
                await asyncio.sleep(EVENT_GAP_S)
            await response.write(piece)
            if cut:
                break
        await response.write_eof()
        return response

    @staticmethod
    def _json(body: bytes, status: int, **headers: str) -> web.Response:
        return web.Response(
            body=body, status=status, headers={"content-type": "application/json", **headers}
        )

    def _bearer_ok(self, request: web.Request) -> bool:
        return request.headers.get("authorization") == f"Bearer {KEY}"

    # ------------------------------------------------------------------ OpenAI-compatible

    async def openai_chat(self, request: web.Request) -> web.StreamResponse:
        """``/v1/chat/completions``, vLLM-style."""
        body = json.loads(await self._record(request))
        if not self._bearer_ok(request):
            return self._json(data("openai-completions/401.json"), 401)
        if body.get("model") == "missing":
            return self._json(data("openai-completions/404.json"), 404)
        if self._rate_limited(request, "openai"):
            return self._json(data("openai-completions/429-rate.json"), 429, **{"retry-after": "0"})
        name = {"nousage": "no-usage.sse", "nofinish": "no-finish.sse"}.get(
            request.match_info["sc"], "stream.sse"
        )
        events = sse_events(data(f"openai/{name}"))
        return await self._stream(
            request, events, "text/event-stream", headers=ID_HEADERS["openai"]
        )

    async def openai_completions(self, request: web.Request) -> web.StreamResponse:
        """``/v1/completions``."""
        body = json.loads(await self._record(request))
        scenario = request.match_info["sc"]
        if not self._bearer_ok(request):
            return self._json(data("openai-completions/401.json"), 401)
        if body.get("model") == "missing":
            return self._json(data("openai-completions/404.json"), 404)
        if scenario == "quota":
            return self._json(data("openai-completions/429-quota.json"), 429)
        if self._rate_limited(request, "completions"):
            return self._json(data("openai-completions/429-rate.json"), 429, **{"retry-after": "0"})
        name = {"midstream": "midstream-error.sse", "nofinish": "no-finish.sse"}.get(
            scenario, "stream.sse"
        )
        events = sse_events(data(f"openai-completions/{name}"))
        return await self._stream(
            request, events, "text/event-stream", scenario == "cut", ID_HEADERS["completions"]
        )

    # ------------------------------------------------------------------ Azure

    async def azure(self, request: web.Request) -> web.StreamResponse:
        """Azure OpenAI chat completions: ``api-key`` header, ``api-version`` query."""
        await self._record(request)
        if request.headers.get("api-key") != KEY:
            return self._json(data("azure-openai/401.json"), 401)
        if "api-version" not in request.query:
            return self._json(b'{"error":{"code":"404","message": "Resource not found"}}', 404)
        if request.match_info["deployment"] != "gpt-4o-mini":
            return self._json(data("azure-openai/404.json"), 404)
        if self._rate_limited(request, "azure"):
            headers = {"retry-after": "1", "retry-after-ms": "50"}
            return self._json(data("azure-openai/429.json"), 429, **headers)
        events = sse_events(data("azure-openai/stream.sse"))
        return await self._stream(request, events, "text/event-stream", headers=ID_HEADERS["azure"])

    # ------------------------------------------------------------------ Bedrock

    async def bedrock(self, request: web.Request) -> web.StreamResponse:
        """ConverseStream: SigV4 checked by recomputing the signature."""
        body = await self._record(request)
        refusal = self._sigv4_refusal(request, body)
        if refusal is not None:
            return refusal
        scenario = request.match_info["sc"]
        if request.match_info["model"] != "meta.llama3-1-8b-instruct-v1:0":
            return self._json(
                data("bedrock/400-model.json"), 400, **{"x-amzn-errortype": "ValidationException:"}
            )
        if self._rate_limited(request, "bedrock"):
            return self._json(
                data("bedrock/429.json"), 429, **{"x-amzn-errortype": "ThrottlingException:"}
            )
        name = "midstream_exception" if scenario == "midstream" else "stream"
        return await self._stream(
            request,
            recorded_frames(name),
            "application/vnd.amazon.eventstream",
            cut=scenario == "cut",
            headers=ID_HEADERS["bedrock"],
        )

    def _sigv4_refusal(self, request: web.Request, body: bytes) -> web.Response | None:
        authorization = request.headers.get("authorization", "")
        if not authorization.startswith("AWS4-HMAC-SHA256 "):
            return self._json(
                b'{"message":"Authorization header requires \'Credential\' parameter."}', 403
            )
        fields = dict(
            part.strip().split("=", 1)
            for part in authorization[len("AWS4-HMAC-SHA256 ") :].split(",")
        )
        access_key, _, region, service, _ = fields["Credential"].split("/")
        if access_key != AWS_ACCESS_KEY_ID:
            return self._json(
                data("bedrock/403-token.json"),
                403,
                **{"x-amzn-errortype": "UnrecognizedClientException:"},
            )
        signed = fields["SignedHeaders"].split(";")
        headers = {name: request.headers[name] for name in signed if name != "host"}
        aws_request = AWSRequest(
            method=request.method,
            url=f"http://{request.host}{request.raw_path}",
            data=body,
            headers=headers,
        )
        aws_request.context["timestamp"] = request.headers["x-amz-date"]
        credentials = Credentials(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)
        auth = SigV4Auth(credentials, service, region)
        expected = auth.signature(
            auth.string_to_sign(aws_request, auth.canonical_request(aws_request)), aws_request
        )
        if (service, region) != ("bedrock", AWS_REGION) or expected != fields["Signature"]:
            return self._json(
                data("bedrock/403-signature.json"),
                403,
                **{"x-amzn-errortype": "InvalidSignatureException:"},
            )
        return None

    # ------------------------------------------------------------------ TGI

    async def tgi(self, request: web.Request) -> web.StreamResponse:
        """``/generate_stream``."""
        body = json.loads(await self._record(request))
        scenario = request.match_info["sc"]
        if request.headers.get("authorization", f"Bearer {KEY}") != f"Bearer {KEY}":
            return self._json(data("tgi/401.json"), 401)
        if body.get("parameters", {}).get("max_new_tokens", 0) > 4000:
            return self._json(data("tgi/422.json"), 422)
        if self._rate_limited(request, "tgi"):
            return self._json(data("tgi/429.json"), 429)
        name = "midstream-error.sse" if scenario == "midstream" else "stream.sse"
        events = sse_events(data(f"tgi/{name}"))
        timings = TGI_TIMINGS if scenario == "timed" else None
        return await self._stream(request, events, "text/event-stream", scenario == "cut", timings)

    # ------------------------------------------------------------------ llama.cpp

    async def llamacpp(self, request: web.Request) -> web.StreamResponse:
        """llama-server ``/completion``."""
        await self._record(request)
        scenario = request.match_info["sc"]
        if request.headers.get("authorization", f"Bearer {KEY}") != f"Bearer {KEY}":
            return self._json(data("llamacpp/401.json"), 401)
        if scenario == "loading":
            return self._json(data("llamacpp/503.json"), 503)
        name = "midstream-error.sse" if scenario == "midstream" else "stream.sse"
        events = sse_events(data(f"llamacpp/{name}"))
        return await self._stream(request, events, "text/event-stream", cut=scenario == "cut")

    # ------------------------------------------------------------------ Replicate

    def _replicate_json(self, request: web.Request, name: str, status: int) -> web.Response:
        base = f"{self.base}/s/{request.match_info['sc']}"
        return self._json(data(f"replicate/{name}").replace(b"{BASE}", base.encode()), status)

    async def replicate_create(self, request: web.Request) -> web.StreamResponse:
        """Create a prediction (official model path, or ``version`` in the body)."""
        await self._record(request)
        if not self._bearer_ok(request):
            return self._json(data("replicate/401.json"), 401)
        if request.match_info.get("name") == "missing":
            return self._json(data("replicate/404.json"), 404)
        if request.match_info["sc"] == "quota":
            return self._json(data("replicate/402.json"), 402)
        if self._rate_limited(request, "replicate"):
            return self._json(data("replicate/429.json"), 429, **{"retry-after": "0"})
        return self._replicate_json(request, "created.json", 201)

    async def replicate_stream(self, request: web.Request) -> web.StreamResponse:
        """The prediction's SSE stream."""
        await self._record(request)
        if not self._bearer_ok(request):
            return self._json(data("replicate/401.json"), 401)
        scenario = request.match_info["sc"]
        name = "midstream-error.sse" if scenario == "midstream" else "stream.sse"
        events = sse_events(data(f"replicate/{name}"))
        return await self._stream(request, events, "text/event-stream", cut=scenario == "cut")

    async def replicate_get(self, request: web.Request) -> web.StreamResponse:
        """The finished prediction, with token metrics."""
        if not self._bearer_ok(request):
            return self._json(data("replicate/401.json"), 401)
        return self._replicate_json(request, "succeeded.json", 200)

    # ------------------------------------------------------------------ hosted dialects

    def _recorded(self, dialect: str, scenario: str) -> list[bytes]:
        name = {"midstream": "midstream-error", "tool": "tool", "incomplete": "incomplete"}.get(
            scenario, "stream"
        )
        return sse_events(data(f"{dialect}/{name}.sse"))

    async def anthropic(self, request: web.Request) -> web.StreamResponse:
        """Anthropic's ``/v1/messages``: ``x-api-key`` and ``anthropic-version``."""
        await self._record(request)
        scenario = request.match_info["sc"]
        ids = {"request-id": FAKE_REQUEST_ID}
        if request.headers.get("x-api-key") != KEY or "anthropic-version" not in request.headers:
            return self._json(data("anthropic/401.json"), 401, **ids)
        if scenario == "overloaded":
            return self._json(data("anthropic/529.json"), 529, **ids)
        if self._rate_limited(request, "anthropic"):
            return self._json(data("anthropic/429.json"), 429, **{"retry-after": "0"}, **ids)
        events = self._recorded("anthropic", scenario)
        return await self._stream(
            request, events, "text/event-stream", cut=scenario == "cut", headers=ids
        )

    async def openai_responses(self, request: web.Request) -> web.StreamResponse:
        """OpenAI's ``/v1/responses``: bearer key."""
        await self._record(request)
        scenario = request.match_info["sc"]
        ids = {"x-request-id": FAKE_REQUEST_ID}
        if not self._bearer_ok(request):
            return self._json(data("openai-responses/401.json"), 401, **ids)
        if self._rate_limited(request, "responses"):
            return self._json(data("openai-responses/429.json"), 429, **{"retry-after": "0"}, **ids)
        events = self._recorded("openai-responses", scenario)
        return await self._stream(
            request, events, "text/event-stream", cut=scenario == "cut", headers=ids
        )

    async def gemini(self, request: web.Request) -> web.StreamResponse:
        """Gemini's ``/v1beta/models/{model}:streamGenerateContent?alt=sse``:
        ``x-goog-api-key``; a key in the URL is refused (it must never travel there)."""
        await self._record(request)
        scenario = request.match_info["sc"]
        if not request.match_info["call"].endswith(":streamGenerateContent"):
            return self._json(b'{"error":{"code":404,"status":"NOT_FOUND"}}', 404)
        if request.query.get("alt") != "sse" or "key" in request.query:
            return self._json(data("gemini/400.json"), 400)
        if request.headers.get("x-goog-api-key") != KEY:
            return self._json(data("gemini/400.json"), 400)
        if self._rate_limited(request, "gemini"):
            return self._json(data("gemini/429.json"), 429)
        events = self._recorded("gemini", scenario)
        return await self._stream(request, events, "text/event-stream", cut=scenario == "cut")
