"""What provider kinds share: joining a base URL with a path, and the URL and key-variable
fields declared once for every kind that has them."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from scenarios.providers.base import join_url
from scenarios.providers.kinds import (
    AnyProvider,
    LlamaCppProvider,
    OpenAICompletionsProvider,
    OpenAIProvider,
    TGIProvider,
)


@pytest.mark.parametrize(
    ("base", "path", "joined"),
    [
        ("http://h:8000/v1", "/chat/completions", "http://h:8000/v1/chat/completions"),
        ("http://h:8000/v1/", "/chat/completions", "http://h:8000/v1/chat/completions"),
        ("http://h:8000/v1//", "chat/completions", "http://h:8000/v1/chat/completions"),
        ("http://h:8080", "generate_stream", "http://h:8080/generate_stream"),
    ],
)
def test_one_slash_between_a_base_url_and_a_path(base: str, path: str, joined: str) -> None:
    assert join_url(base, path) == joined


SERVERS = [
    ("openai", OpenAIProvider),
    ("openai-completions", OpenAICompletionsProvider),
    ("tgi", TGIProvider),
    ("llamacpp", LlamaCppProvider),
]


@pytest.mark.parametrize(("kind", "model"), SERVERS)
def test_every_server_kind_takes_the_same_url_and_key_fields(kind: str, model: type) -> None:
    adapter: TypeAdapter[AnyProvider] = TypeAdapter(AnyProvider)
    entry = {"name": "p", "kind": kind, "model": "m", "base_url": "http://h:1/v1"}
    provider = adapter.validate_python({**entry, "api_key_env": "KEY", "metrics_api_key_env": "M"})
    assert isinstance(provider, model)
    assert provider.secret_env_vars() == ["KEY", "M"]
    assert provider.endpoint_urls() == ["http://h:1/v1"]
    assert adapter.validate_python(entry).secret_env_vars() == []
    for bad in ({"base_url": "ftp://h/v1"}, {"api_key_env": "not a name"}):
        with pytest.raises(ValidationError):
            adapter.validate_python({**entry, **bad})
