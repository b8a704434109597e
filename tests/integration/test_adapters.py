"""Every provider adapter against a real fake server replaying its recorded wire format.

The fake (``tests/fakes/provider_server.py``) checks credentials as the real services do
(bearer, Azure api-key, Bedrock SigV4 recomputed with botocore) and answers with the
recorded success streams and error bodies; these tests check what the adapters make of
them: stamps, counts, server timings, error classes, Retry-After handling.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from scenarios.model import Scenario
from tests.fakes.provider_server import AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, KEY, FakeProviders
from workers.client.adapters import AdapterContext, ProviderSetupError, build_adapter
from workers.client.http import make_client
from workers.client.result import RequestResult
from workers.client.secrets import Secrets
from workers.prompts.plan import PlannedRequest

pytestmark = pytest.mark.integration

REQUEST = PlannedRequest(seq=0, prompt_tokens=8, output_tokens=3, prompt="Say hello to the world")


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProviders]:
    server = FakeProviders().start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KEY", KEY)
    monkeypatch.setenv("FAKE_AWS_ID", AWS_ACCESS_KEY_ID)
    monkeypatch.setenv("FAKE_AWS_SECRET", AWS_SECRET_ACCESS_KEY)
    monkeypatch.setenv("WRONG_KEY", "sk-wrong-0123456789abcdef")


def provider(**fields: Any) -> Any:
    """A validated provider, through the same schema a scenario file goes through."""
    scenario = Scenario.model_validate(
        {
            "name": "t",
            "providers": [{"name": "p", **fields}],
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
    )
    return scenario.providers[0]


# The fake lives on loopback: these variables may be sent there (and nowhere else).
BOUND = dict.fromkeys(
    ("FAKE_KEY", "FAKE_AWS_ID", "FAKE_AWS_SECRET", "WRONG_KEY", "UNSET_VARIABLE_XYZ"),
    ("http://127.0.0.1:*",),
)


def measure(spec: Any, request: PlannedRequest = REQUEST) -> RequestResult:
    async def run() -> RequestResult:
        async with make_client() as http:
            context = AdapterContext(http, Secrets(BOUND, holder="worker test-worker"))
            adapter = await build_adapter(spec, context)
            return await adapter.measure(http, request, intended_start=0)

    return asyncio.run(run())


def kinds(fake: FakeProviders, scenario: str, **override: Any) -> dict[str, dict[str, Any]]:
    """One provider entry per kind, pointed at ``scenario`` of the fake."""
    specs: dict[str, dict[str, Any]] = {
        "openai": {
            "kind": "openai",
            "base_url": fake.url(scenario, "/v1"),
            "model": "m",
            "api_key_env": "FAKE_KEY",
        },
        "openai-completions": {
            "kind": "openai-completions",
            "base_url": fake.url(scenario, "/v1"),
            "model": "m",
            "api_key_env": "FAKE_KEY",
        },
        "azure-openai": {
            "kind": "azure-openai",
            "endpoint": fake.url(scenario),
            "model": "gpt-4o-mini",
            "api_key_env": "FAKE_KEY",
        },
        "bedrock": {
            "kind": "bedrock",
            "model": "meta.llama3-1-8b-instruct-v1:0",
            "endpoint_url": fake.url(scenario),
            "access_key_id_env": "FAKE_AWS_ID",
            "secret_access_key_env": "FAKE_AWS_SECRET",
        },
        "tgi": {"kind": "tgi", "base_url": fake.url(scenario), "api_key_env": "FAKE_KEY"},
        "llamacpp": {"kind": "llamacpp", "base_url": fake.url(scenario), "api_key_env": "FAKE_KEY"},
        "replicate": {
            "kind": "replicate",
            "base_url": fake.url(scenario, "/v1"),
            "model": "meta/meta-llama-3-8b-instruct",
            "api_key_env": "FAKE_KEY",
        },
    }
    for spec in specs.values():
        spec.update(override)
    return specs


# kind -> (token events, prompt tokens, completion tokens, count source, finish reason) of
# the recorded stream; Replicate never says why an answer ended (docs/providers.md)
EXPECTED = {
    "openai": (3, 9, 3, "usage", "length"),
    "openai-completions": (3, 5, 3, "usage", "length"),
    "azure-openai": (2, 9, 2, "usage", "length"),
    "bedrock": (3, 11, 3, "usage", "length"),
    "tgi": (2, 7, 3, "usage", "stop"),
    "llamacpp": (2, 6, 2, "usage", "length"),
    "replicate": (3, 7, 3, "usage", None),
}


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_recorded_stream_is_measured(fake: FakeProviders, kind: str) -> None:
    result = measure(provider(**kinds(fake, "ok")[kind]))
    assert result.failure is None, result.failure and result.failure.message
    events, prompt, completion, source, reason = EXPECTED[kind]
    assert len(result.token_stamps) == events
    assert (result.prompt_tokens, result.completion_tokens, result.token_count_source) == (
        prompt,
        completion,
        source,
    )
    assert (result.prompt_count_source, result.finish_reason) == ("usage", reason)
    # Stamp order of docs/metrics.md; the role-only / filter-only first chunks are not tokens.
    assert 0 < result.sent <= result.first_byte <= result.first_token  # type: ignore[operator]
    assert result.first_token == result.first_output_token == result.token_stamps[0]
    assert result.last_token == result.token_stamps[-1] <= result.end  # type: ignore[operator]
    assert result.retries == 0


def test_llamacpp_server_timings_are_recorded(fake: FakeProviders) -> None:
    result = measure(provider(**kinds(fake, "ok")["llamacpp"]))
    assert result.server_prompt_ns == 12_500_000
    assert result.server_decode_ns == 20_250_000


def test_requests_on_the_wire(fake: FakeProviders) -> None:
    import orjson

    before = len(fake.requests)
    measure(provider(**kinds(fake, "ok")["azure-openai"]))
    measure(provider(**kinds(fake, "ok")["tgi"]))
    measure(provider(**kinds(fake, "ok")["bedrock"]))
    azure, tgi, bedrock = fake.requests[before:]
    assert (
        azure["path"]
        == "/s/ok/openai/deployments/gpt-4o-mini/chat/completions?api-version=2024-10-21"
    )
    assert azure["headers"]["api-key"] == KEY and "Authorization" not in azure["headers"]
    assert orjson.loads(azure["body"])["stream_options"] == {"include_usage": True}
    assert orjson.loads(tgi["body"]) == {
        "inputs": REQUEST.prompt,
        "parameters": {"max_new_tokens": 3, "details": True},
    }
    assert bedrock["path"] == "/s/ok/model/meta.llama3-1-8b-instruct-v1:0/converse-stream"
    assert orjson.loads(bedrock["body"])["inferenceConfig"] == {"maxTokens": 3}


AUTH_STATUS = {"bedrock": 403}


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_auth_failure_is_a_4xx_without_the_key(fake: FakeProviders, kind: str) -> None:
    spec = kinds(fake, "ok")[kind]
    if kind == "bedrock":
        spec["access_key_id_env"] = "WRONG_KEY"
    else:
        spec["api_key_env"] = "WRONG_KEY"
    result = measure(provider(**spec))
    assert result.failure is not None
    assert result.failure.error_class == "http_4xx"
    assert result.failure.http_status == AUTH_STATUS.get(kind, 401)
    assert "sk-wrong-0123456789abcdef" not in result.failure.message


def test_bedrock_signature_with_the_wrong_secret_is_refused(fake: FakeProviders) -> None:
    spec = kinds(fake, "ok")["bedrock"] | {"secret_access_key_env": "WRONG_KEY"}
    result = measure(provider(**spec))
    assert result.failure is not None and result.failure.http_status == 403
    assert "signature" in result.failure.message


@pytest.mark.parametrize(
    ("kind", "field", "status"),
    [
        ("openai-completions", {"model": "missing"}, 404),
        ("azure-openai", {"model": "missing"}, 404),
        ("bedrock", {"model": "missing.model-v1:0"}, 400),
        ("replicate", {"model": "meta/missing"}, 404),
    ],
)
def test_unknown_model(fake: FakeProviders, kind: str, field: dict[str, str], status: int) -> None:
    result = measure(provider(**kinds(fake, "ok")[kind] | field))
    assert result.failure is not None and result.failure.http_status == status


RATE_LIMITED = ["openai", "openai-completions", "azure-openai", "bedrock", "tgi", "replicate"]


@pytest.mark.parametrize("kind", RATE_LIMITED)
def test_429_is_recorded_by_default(fake: FakeProviders, kind: str) -> None:
    result = measure(provider(**kinds(fake, "ratelimit")[kind]))
    assert result.failure is not None and result.failure.error_class == "http_429"
    assert result.retries == 0


@pytest.mark.parametrize("kind", RATE_LIMITED)
def test_429_is_retried_when_the_provider_opts_in(fake: FakeProviders, kind: str) -> None:
    spec = kinds(fake, "ratelimit-once", retry={"max_retries": 3, "initial_backoff_s": 0.01})[kind]
    result = measure(provider(**spec))
    assert result.failure is None, result.failure and result.failure.message
    assert result.retries == 1
    assert result.retry_wait_ns > 0
    assert len(result.token_stamps) == EXPECTED[kind][0]
    # `sent` is the first try's: TTFT includes the refused try and the wait.
    assert result.first_byte - result.sent >= result.retry_wait_ns  # type: ignore[operator]


def test_retry_after_ms_is_honoured(fake: FakeProviders) -> None:
    # Azure sends retry-after-ms: 50 (and retry-after: 1); the finer one is used.
    spec = kinds(fake, "ratelimit-once-ms", retry={"max_retries": 1})["azure-openai"]
    result = measure(provider(**spec))
    assert result.retries == 1
    assert result.retry_wait_ns >= 40_000_000  # a lower bound only: timers never fire much early


def test_retries_stop_at_max_retries(fake: FakeProviders) -> None:
    spec = kinds(fake, "ratelimit", retry={"max_retries": 2, "initial_backoff_s": 0.01})["tgi"]
    result = measure(provider(**spec))
    assert result.failure is not None and result.failure.error_class == "http_429"
    assert result.retries == 2


def test_retry_after_beyond_the_budget_keeps_the_429(fake: FakeProviders) -> None:
    # retry-after-ms 50 ms against a 10 ms budget: no retry, the 429 stays recorded.
    spec = kinds(fake, "ratelimit", retry={"max_retries": 3, "max_wait_s": 0.01})["azure-openai"]
    result = measure(provider(**spec))
    assert result.failure is not None and result.failure.error_class == "http_429"
    assert result.retries == 0


def test_exhausted_quota_is_not_retried(fake: FakeProviders) -> None:
    spec = kinds(fake, "quota", retry={"max_retries": 3})["openai-completions"]
    result = measure(provider(**spec))
    assert result.failure is not None and result.failure.error_class == "http_429"
    assert result.retries == 0
    assert "quota" in result.failure.message


def test_replicate_insufficient_credit_is_a_4xx(fake: FakeProviders) -> None:
    result = measure(provider(**kinds(fake, "quota")["replicate"]))
    assert result.failure is not None and result.failure.http_status == 402


MIDSTREAM = {
    "openai-completions": ("http_5xx", 500),
    "bedrock": ("http_4xx", 424),  # modelStreamErrorException is documented as 424
    "tgi": ("http_4xx", 424),  # TGI's "generation" errors use 424
    "llamacpp": ("http_5xx", 500),
    "replicate": ("http_5xx", None),
}


@pytest.mark.parametrize("kind", sorted(MIDSTREAM))
def test_midstream_error_keeps_the_tokens_before_it(fake: FakeProviders, kind: str) -> None:
    result = measure(provider(**kinds(fake, "midstream")[kind]))
    assert result.failure is not None
    assert (result.failure.error_class, result.failure.http_status) == MIDSTREAM[kind]
    assert len(result.token_stamps) == 1


@pytest.mark.parametrize("kind", ["openai-completions", "bedrock", "tgi", "llamacpp", "replicate"])
def test_stream_ended_short_is_an_incomplete_answer(fake: FakeProviders, kind: str) -> None:
    # The body ends in good order after the first event: no transport error, but the
    # answer never said it finished.
    result = measure(provider(**kinds(fake, "cut")[kind]))
    assert result.failure is not None and result.failure.error_class == "incomplete"
    assert f"after {len(result.token_stamps)} token events" in result.failure.message


@pytest.mark.parametrize("kind", ["openai", "openai-completions"])
def test_done_without_a_finish_reason_is_an_incomplete_answer(
    fake: FakeProviders, kind: str
) -> None:
    result = measure(provider(**kinds(fake, "nofinish")[kind]))
    assert result.failure is not None and result.failure.error_class == "incomplete"
    assert "with [DONE] but no finish_reason" in result.failure.message


def test_a_server_streaming_no_usage_leaves_the_prompt_count_unknown(fake: FakeProviders) -> None:
    # llama-cpp-python's server: a finish_reason, no usage chunk whatever was asked.
    result = measure(provider(**kinds(fake, "nousage")["openai"]))
    assert result.failure is None, result.failure and result.failure.message
    assert (result.prompt_tokens, result.prompt_count_source) == (None, None)
    assert (result.completion_tokens, result.token_count_source) == (3, "events")
    assert result.finish_reason == "stop"


def test_output_length_knobs_and_extra_body_on_the_wire(fake: FakeProviders) -> None:
    import orjson

    knobs = {"enforce_output_length": True, "extra_body": {"top_k": 1, "seed": 7}}
    before = len(fake.requests)
    for kind in ("openai-completions", "llamacpp"):
        result = measure(provider(**kinds(fake, "ok", **knobs)[kind]))
        assert result.failure is None, result.failure and result.failure.message
        measure(provider(**kinds(fake, "ok")[kind]))  # without them
    completions, plain_completions, llama, plain_llama = (
        orjson.loads(r["body"]) for r in fake.requests[before:]
    )
    assert completions == {
        "model": "m",
        "prompt": REQUEST.prompt,
        "max_tokens": 3,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
        "min_tokens": 3,
        "top_k": 1,
        "seed": 7,
    }
    assert "ignore_eos" not in plain_completions and "min_tokens" not in plain_completions
    # llama-server: n_predict is the planned length; ignore_eos keeps it from stopping early.
    assert llama == {
        "prompt": REQUEST.prompt,
        "n_predict": 3,
        "stream": True,
        "cache_prompt": False,
        "ignore_eos": True,
        "top_k": 1,
        "seed": 7,
    }
    assert "ignore_eos" not in plain_llama and "top_k" not in plain_llama


def test_llamacpp_loading_is_a_5xx(fake: FakeProviders) -> None:
    result = measure(provider(**kinds(fake, "loading")["llamacpp"]))
    assert result.failure is not None and result.failure.http_status == 503


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_missing_key_variable_fails_setup_clearly(fake: FakeProviders, kind: str) -> None:
    spec = kinds(fake, "ok")[kind]
    spec["access_key_id_env" if kind == "bedrock" else "api_key_env"] = "UNSET_VARIABLE_XYZ"
    with pytest.raises(ProviderSetupError, match="UNSET_VARIABLE_XYZ is not set"):
        measure(provider(**spec))


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_unbound_key_variable_fails_setup_naming_variable_and_host(
    fake: FakeProviders, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UNBOUND_KEY_XYZ", "sk-unbound-0123456789")
    spec = kinds(fake, "ok")[kind]
    spec["access_key_id_env" if kind == "bedrock" else "api_key_env"] = "UNBOUND_KEY_XYZ"
    with pytest.raises(
        ProviderSetupError, match=r"UNBOUND_KEY_XYZ may not be sent to host '127\.0\.0\.1'"
    ):
        measure(provider(**spec))
    assert not any("sk-unbound-0123456789" in str(request) for request in fake.requests)


# kind -> (response id, request id header) the fake's recorded answers carry: the
# streams' own id where the dialect has one, the header each service sends.
IDS = {
    "openai": ("chatcmpl-9f8e", "req_openai_1"),
    "openai-completions": ("cmpl-4c1d", "req_completions_1"),
    # Azure's first chunk (prompt filter results) has an empty id: the next one counts;
    # x-request-id comes before apim-request-id.
    "azure-openai": ("chatcmpl-AZ1x", "req_azure_1"),
    "bedrock": (None, "amzn-bedrock-1"),  # event frames carry no id
    "tgi": (None, None),
    "llamacpp": (None, None),
    "replicate": ("gm3qorzdhgbfurvjtvhg6dckhu", None),  # the prediction's id
}


@pytest.mark.parametrize("kind", sorted(IDS))
def test_ids_and_connection_phases_per_kind(fake: FakeProviders, kind: str) -> None:
    result = measure(provider(**kinds(fake, "ok")[kind]))
    assert result.failure is None, result.failure and result.failure.message
    response_id, request_id = IDS[kind]
    assert (result.response_id, result.server_request_id) == (response_id, request_id)
    assert result.phases.dns_start is None and result.phases.tls_start is None  # loopback IP, http
    assert result.sent <= result.phases.request_written <= result.first_byte  # type: ignore[operator]
    if kind == "replicate":
        # The stream's GET reuses the connection the prediction's POST opened (one host
        # here): the phases recorded are the stream's, and it opened nothing.
        assert result.phases.connection_new is False and result.phases.connect_start is None
        return
    # A fresh client: the request opened its connection.
    assert result.phases.connection_new is True
    assert result.phases.connect_start is not None and result.phases.connect_end is not None
    assert (
        result.sent
        <= result.phases.connect_start
        <= result.phases.connect_end
        <= result.phases.request_written
    )


def test_tgi_queue_time_header_is_the_server_queue(fake: FakeProviders) -> None:
    result = measure(provider(**kinds(fake, "timed")["tgi"]))
    assert result.failure is None, result.failure and result.failure.message
    assert (result.server_queue_ns, result.server_timing_source) == (17_000_000, "tgi")
    plain = measure(provider(**kinds(fake, "ok")["tgi"]))
    assert (plain.server_queue_ns, plain.server_timing_source) == (None, None)


def test_llamacpp_prompt_time_is_the_server_ttft(fake: FakeProviders) -> None:
    result = measure(provider(**kinds(fake, "ok")["llamacpp"]))
    assert result.server_ttft_ns == result.server_prompt_ns == 12_500_000
    assert result.server_timing_source == "llamacpp"
