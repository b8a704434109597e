"""The adapter registry and the narrow context adapters are built from."""

from __future__ import annotations

import asyncio
import typing

import httpx
import pytest

import workers.client.adapters  # noqa: F401 - importing the package registers every adapter
from scenarios.providers.kinds import AnyProvider, OpenAIProvider
from workers.client.adapters.base import (
    AdapterContext,
    ProviderSetupError,
    build_adapter,
    read_secret,
)
from workers.client.secrets import Secrets


def test_every_provider_kind_of_the_schema_has_an_adapter() -> None:
    """A kind the scenario schema accepts but no adapter serves would fail at run time."""
    kinds = [
        typing.get_args(cls.model_fields["kind"].annotation)[0]
        for cls in typing.get_args(AnyProvider)
    ]
    assert len(kinds) == len(set(kinds)) >= 8

    async def unknown_kinds() -> list[str]:
        missing = []
        async with httpx.AsyncClient() as http:
            context = AdapterContext(http, Secrets({}, {}), endpoint="http://127.0.0.1:9/v1")
            for kind in kinds:
                # A provider with nothing but its kind: the registry is asked before the
                # factory reads any field, so any other failure means "registered".
                fake = OpenAIProvider.model_construct(kind=kind)  # type: ignore[call-arg]
                try:
                    await build_adapter(fake, context)
                except ProviderSetupError as exc:
                    if "no adapter registered" in str(exc):
                        missing.append(kind)
                except AttributeError:
                    pass
        return missing

    assert asyncio.run(unknown_kinds()) == []


def test_an_unregistered_kind_is_a_setup_error() -> None:
    async def build() -> None:
        async with httpx.AsyncClient() as http:
            await build_adapter(
                OpenAIProvider.model_construct(kind="carrier-pigeon"),  # type: ignore[call-arg, arg-type]
                AdapterContext(http, Secrets({}, {})),
            )

    with pytest.raises(ProviderSetupError, match="no adapter registered for kind 'carrier-pigeon'"):
        asyncio.run(build())


def test_read_secret_releases_a_key_only_to_its_bound_host() -> None:
    async def check() -> None:
        async with httpx.AsyncClient() as http:
            context = AdapterContext(http, Secrets({"K": ("api.example.com",)}, {"K": "sk-1"}))
            assert read_secret(None, "https://anywhere.example/v1", "p", context) is None
            assert read_secret("K", "https://api.example.com/v1", "p", context) == "sk-1"
            with pytest.raises(
                ProviderSetupError, match=r"may not be sent to host 'evil\.example'"
            ):
                read_secret("K", "https://evil.example/v1", "p", context)
            unset = AdapterContext(http, Secrets({"K": ("api.example.com",)}, {}))
            with pytest.raises(ProviderSetupError, match="not set"):
                read_secret("K", "https://api.example.com/v1", "p", unset)

    asyncio.run(check())
