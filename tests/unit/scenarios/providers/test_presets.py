"""The shipped preset catalog and ``preset:`` resolution in scenarios."""

from __future__ import annotations

import pytest

from scenarios.loader import ScenarioError, parse_scenario
from scenarios.providers.base import Pricing
from scenarios.providers.kinds import (
    AzureOpenAIProvider,
    BedrockProvider,
    OpenAIProvider,
    ReplicateProvider,
)
from scenarios.providers.presets import load_presets, preset_names, resolve_preset

REST = """
workload: {mix: [{prompt_tokens: {dist: fixed, value: 8}, output_tokens: {dist: fixed, value: 4}}]}
load: {concurrency: [1], requests_per_level: 2}
"""


def providers(entries: str) -> list[object]:
    return list(parse_scenario(f"name: t\nproviders:\n{entries}{REST}").providers)


def test_catalog_has_the_promised_presets_each_resolving_to_a_known_kind() -> None:
    assert {
        "together",
        "fireworks",
        "groq",
        "openrouter",
        "azure",
        "bedrock",
        "replicate",
        "anthropic",
        "openai",
        "gemini",
    } <= set(preset_names())
    for preset in load_presets().values():
        assert preset.kind in {
            "openai",
            "azure-openai",
            "bedrock",
            "replicate",
            "anthropic",
            "openai-responses",
            "gemini",
        }
        assert preset.prices.basis in {"listed", "estimate"} and preset.prices.source
        assert preset.prices.models


def test_groq_needs_only_a_model() -> None:
    (groq,) = providers("  - {preset: groq, model: llama-3.1-8b-instant}\n")
    assert isinstance(groq, OpenAIProvider)
    assert (groq.name, groq.base_url, groq.api_key_env) == (
        "groq",
        "https://api.groq.com/openai/v1",
        "GROQ_API_KEY",
    )
    assert groq.pricing == Pricing(input_per_mtok=0.05, output_per_mtok=0.08)


def test_scenario_keys_override_the_preset() -> None:
    (together,) = providers(
        "  - {preset: together, name: tg, model: meta-llama/Llama-3.3-70B-Instruct-Turbo, api_key_env: MY_TOGETHER,"
        " pricing: {input_per_mtok: 1, output_per_mtok: 2}, timeout_s: 5, retry: {max_retries: 2}}\n"
    )
    assert isinstance(together, OpenAIProvider)
    assert (together.name, together.api_key_env, together.timeout_s) == ("tg", "MY_TOGETHER", 5)
    assert together.pricing == Pricing(input_per_mtok=1, output_per_mtok=2)
    assert together.retry is not None and together.retry.max_retries == 2


def test_model_outside_the_catalog_has_no_price() -> None:
    (fireworks,) = providers("  - {preset: fireworks, model: accounts/me/models/my-tune}\n")
    assert fireworks.pricing is None  # type: ignore[attr-defined]


def test_other_kinds() -> None:
    bedrock, azure, replicate = providers(
        '  - {preset: bedrock, model: "meta.llama3-1-70b-instruct-v1:0"}\n'
        "  - {preset: azure, model: gpt-4o-mini, endpoint: 'https://r.openai.azure.com'}\n"
        "  - {preset: replicate, model: meta/meta-llama-3-70b-instruct}\n"
    )
    assert isinstance(bedrock, BedrockProvider) and bedrock.region == "us-east-1"
    assert bedrock.secret_env_vars() == ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]
    assert isinstance(azure, AzureOpenAIProvider) and azure.secret_env_vars() == [
        "AZURE_OPENAI_API_KEY"
    ]
    assert (
        isinstance(replicate, ReplicateProvider) and replicate.api_key_env == "REPLICATE_API_TOKEN"
    )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("  - {preset: nope, model: x}\n", "unknown preset 'nope'"),
        ("  - {preset: groq, kind: bedrock, model: x}\n", "is of kind 'openai'"),
        ("  - {preset: azure, model: gpt-4o}\n", "endpoint: Field required"),
        ("  - {preset: groq, model: x, bogus: 1}\n", "Extra inputs are not permitted"),
    ],
)
def test_bad_preset_entries_name_the_problem(entry: str, message: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        providers(entry)
    assert message in str(caught.value)


def test_entries_without_preset_pass_through_unchanged() -> None:
    entry = {"kind": "openai", "name": "x"}
    assert resolve_preset(entry) is entry
