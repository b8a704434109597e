"""The hosted APIs' dialects (anthropic, openai-responses, gemini) against the recorded-wire
fake over loopback (tests/fakes/provider_server.py): the real adapter, HTTP client and
secret lookup, answered with each provider's documented event sequence, including a
thinking block, a tool call, an error event, a cut stream and the error answers."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from scenarios.model import Scenario
from tests.fakes.provider_server import FAKE_REQUEST_ID, KEY, FakeProviders
from workers.client.adapters import AdapterContext, build_adapter
from workers.client.http import make_client
from workers.client.result import RequestResult
from workers.client.secrets import Secrets
from workers.prompts.plan import PlannedRequest, ToolSet

pytestmark = pytest.mark.integration

REQUEST = PlannedRequest(seq=0, prompt_tokens=8, output_tokens=3, prompt="Say hello to the world")
BOUND = dict.fromkeys(("FAKE_KEY", "WRONG_KEY"), ("http://127.0.0.1:*",))
KINDS = ("anthropic", "openai-responses", "gemini")


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProviders]:
    server = FakeProviders().start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KEY", KEY)
    monkeypatch.setenv("WRONG_KEY", "sk-wrong-0123456789abcdef")


def spec(fake: FakeProviders, kind: str, scenario: str, key: str = "FAKE_KEY") -> Any:
    base = {
        "anthropic": fake.url(scenario),
        "openai-responses": fake.url(scenario, "/v1"),
        "gemini": fake.url(scenario),
    }[kind]
    entry = {"name": "p", "kind": kind, "base_url": base, "model": "m", "api_key_env": key}
    return Scenario.model_validate(
        {
            "name": "t",
            "providers": [entry],
            "workload": {
                "mix": [
                    {
                        "prompt_tokens": {"dist": "fixed", "value": 8},
                        "output_tokens": {"dist": "fixed", "value": 3},
                    }
                ]
            },
            "load": {"concurrency": [1], "requests_per_level": 1},
        }
    ).providers[0]


def measure(provider: Any, request: PlannedRequest = REQUEST) -> RequestResult:
    async def run() -> RequestResult:
        async with make_client() as http:
            context = AdapterContext(http, Secrets(BOUND, holder="worker test-worker"))
            adapter = await build_adapter(provider, context)
            return await adapter.measure(http, request, intended_start=0)

    return asyncio.run(run())


# kind -> token events, prompt, completion, reasoning, cached, cache written, finish,
# response id, request id header of the recorded text stream
EXPECTED = {
    "anthropic": (3, 12, 9, None, 6, 2, "length", "msg_01XFDUDYJgAACzvnptvVoYEL", FAKE_REQUEST_ID),
    "openai-responses": (
        3,
        1290,
        22,
        16,
        1152,
        None,
        "stop",
        "resp_68af4030592c81938ec0a5fbab4a3e9f05438e46b5f69a3b",
        FAKE_REQUEST_ID,
    ),
    "gemini": (3, 10, 31, 28, 4, None, "length", "mKqKaMe8Ke2Ux_APjZCq-QI", None),
}


@pytest.mark.parametrize("kind", KINDS)
def test_a_thinking_answer_is_measured_with_its_usage_and_ids(
    fake: FakeProviders, kind: str
) -> None:
    result = measure(spec(fake, kind, "ok"))
    assert result.failure is None, result.failure and result.failure.message
    events, prompt, completion, reasoning, cached, written, finish, rid, sid = EXPECTED[kind]
    assert len(result.token_stamps) == events
    # The reasoning event comes first: TTFT counts it, the first output token does not.
    # The fake sends them 3 ms apart; on a loaded machine both may arrive in one read and
    # share its receive stamp (merged stamps, docs/metrics.md): equal, never reversed.
    assert result.first_token is not None and result.first_output_token is not None
    assert result.sent < result.first_token <= result.first_output_token <= result.last_token  # type: ignore[operator]
    assert result.token_stamps[0] == result.first_token
    assert (result.prompt_tokens, result.completion_tokens, result.reasoning_tokens) == (
        prompt,
        completion,
        reasoning,
    )
    assert (result.cached_tokens, result.cache_write_tokens) == (cached, written)
    assert (result.finish_reason, result.response_id, result.server_request_id) == (
        finish,
        rid,
        sid,
    )


@pytest.mark.parametrize("kind", KINDS)
def test_a_tool_call_is_counted_and_ends_as_tool_calls(fake: FakeProviders, kind: str) -> None:
    tools = ToolSet([{"type": "function", "function": {"name": "get_weather"}}], "auto")
    request = PlannedRequest(0, 8, 30, "Weather in Paris?", tools=tools)
    result = measure(spec(fake, kind, "tool"), request)
    assert result.failure is None, result.failure and result.failure.message
    assert (result.tool_calls, result.finish_reason) == (1, "tool_calls")
    assert result.tool_call_at is not None and result.tool_call_at in result.token_stamps
    sent = fake.requests[-1]["body"]
    assert b"get_weather" in sent  # the tool went out in the dialect's own shape


# kind -> (error class, status) of the recorded mid-stream error event
MIDSTREAM = {
    "anthropic": ("http_5xx", 529),
    "openai-responses": ("http_5xx", 500),
    "gemini": ("http_5xx", 503),
}


@pytest.mark.parametrize("kind", KINDS)
def test_an_error_event_after_a_token_is_classified(fake: FakeProviders, kind: str) -> None:
    result = measure(spec(fake, kind, "midstream"))
    assert result.failure is not None
    assert (result.failure.error_class, result.failure.http_status) == MIDSTREAM[kind]
    assert len(result.token_stamps) == 1  # the token before it was measured


@pytest.mark.parametrize("kind", KINDS)
def test_a_wrong_key_is_the_providers_auth_error(fake: FakeProviders, kind: str) -> None:
    result = measure(spec(fake, kind, "ok", key="WRONG_KEY"))
    assert result.failure is not None
    # Gemini answers an invalid key with 400 INVALID_ARGUMENT (API_KEY_INVALID).
    assert result.failure.http_status == (400 if kind == "gemini" else 401)
    assert result.failure.error_class == "http_4xx"
    assert "sk-wrong-0123456789abcdef" not in result.failure.message


@pytest.mark.parametrize("kind", KINDS)
def test_rate_limits_and_cut_streams(fake: FakeProviders, kind: str) -> None:
    limited = measure(spec(fake, kind, "ratelimit"))
    assert limited.failure is not None and limited.failure.error_class == "http_429"
    cut = measure(spec(fake, kind, "cut"))
    assert cut.failure is not None and cut.failure.error_class == "incomplete"


def test_anthropic_overloaded_answer_is_a_5xx(fake: FakeProviders) -> None:
    result = measure(spec(fake, "anthropic", "overloaded"))
    assert result.failure is not None
    assert (result.failure.error_class, result.failure.http_status) == ("http_5xx", 529)


def test_responses_cut_at_max_output_tokens_is_length(fake: FakeProviders) -> None:
    result = measure(spec(fake, "openai-responses", "incomplete"))
    assert result.failure is None and result.finish_reason == "length"


@pytest.mark.parametrize(
    ("kind", "header", "value"),
    [
        ("anthropic", "x-api-key", KEY),
        ("openai-responses", "authorization", f"Bearer {KEY}"),
        ("gemini", "x-goog-api-key", KEY),
    ],
)
def test_the_key_travels_in_the_dialects_header_only(
    fake: FakeProviders, kind: str, header: str, value: str
) -> None:
    before = len(fake.requests)
    assert measure(spec(fake, kind, "ok")).failure is None
    (sent,) = fake.requests[before:]
    headers = {name.lower(): text for name, text in sent["headers"].items()}
    assert headers[header] == value
    assert KEY not in sent["path"]  # never in the URL (Gemini's ?key= form is not used)
    assert KEY.encode() not in sent["body"]
    others = {name: text for name, text in headers.items() if name != header}
    assert all(KEY not in text for text in others.values())
    if kind == "anthropic":
        assert headers["anthropic-version"] == "2023-06-01"
    if kind == "gemini":
        assert sent["path"].endswith("/v1beta/models/m:streamGenerateContent?alt=sse")
