"""What each target of the gateway gets: the primary the client's body and auth; a
fallback its own model and key, never the client's key; both the request id."""

from __future__ import annotations

import orjson
import pytest

from scenarios.providers.kinds import OpenAIProvider
from workers.gateway.proxy import provider_key
from workers.gateway.targets import build_target, falls_back

BODY = orjson.dumps({"model": "client-model", "messages": [{"role": "user", "content": "hi"}]})
HEADERS = {b"authorization": b"Bearer sk-client", b"x-tokenbench-request": b"tokenbench.s0.a.b.1.2"}


def _provider(name: str, model: str, key_env: str | None = None) -> OpenAIProvider:
    return OpenAIProvider(
        name=name,
        kind="openai",
        base_url="https://api.example.test:8443/v1",
        model=model,
        api_key_env=key_env,
    )


def _split(request: bytes) -> tuple[bytes, dict[str, bytes], bytes]:
    head, _, body = request.partition(b"\r\n\r\n")
    first, *lines = head.split(b"\r\n")
    headers = dict(line.split(b": ", 1) for line in lines)
    return first, headers, body


@pytest.mark.parametrize(("status", "expected"), [(200, False), (400, False), (404, False),
                                                  (429, True), (500, True), (503, True)])  # fmt: skip
def test_which_answers_fall_back(status: int, expected: bool) -> None:
    assert falls_back(status) is expected


def test_the_primary_gets_the_clients_body_auth_and_id() -> None:
    primary = build_target(_provider("p", "ignored"), "http://127.0.0.1:9101/v1", None, False)
    first, headers, body = _split(primary.chat_request(BODY, HEADERS, stream=True))
    assert first == b"POST /v1/chat/completions HTTP/1.1"
    assert headers[b"host"] == b"127.0.0.1:9101"
    assert headers[b"authorization"] == b"Bearer sk-client"
    assert headers[b"x-tokenbench-request"] == b"tokenbench.s0.a.b.1.2"
    assert headers[b"accept"] == b"text/event-stream"
    assert body == BODY and int(headers[b"content-length"]) == len(BODY)


def test_a_fallback_gets_its_own_model_and_key_never_the_clients() -> None:
    fallback = build_target(
        _provider("f", "fallback-model"), "http://127.0.0.1:9102/x/v1", None, True
    )
    first, headers, body = _split(fallback.chat_request(BODY, HEADERS, stream=False))
    assert first == b"POST /x/v1/chat/completions HTTP/1.1"
    assert b"authorization" not in headers
    assert orjson.loads(body)["model"] == "fallback-model"
    assert int(headers[b"content-length"]) == len(body)
    keyed = build_target(_provider("f", "m"), "http://127.0.0.1:9102/v1", "sk-own", True)
    assert (
        _split(keyed.chat_request(BODY, {}, stream=True))[1][b"authorization"] == b"Bearer sk-own"
    )


def test_a_fallback_key_is_read_for_its_own_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FALLBACK_KEY", "sk-fallback")
    assert provider_key(_provider("f", "m", "FALLBACK_KEY")) == "sk-fallback"
    monkeypatch.delenv("FALLBACK_KEY")
    with pytest.raises(RuntimeError, match="FALLBACK_KEY"):
        provider_key(_provider("f", "m", "FALLBACK_KEY"))
