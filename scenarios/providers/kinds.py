"""Provider kinds of a scenario, one model each, chosen by the ``kind`` discriminator.

A new adapter adds its model here (and to ``AnyProvider``) and registers its client under
the same ``kind`` in ``workers/client/adapters``; callers never branch on the kind. The
fields kinds share are declared once in scenarios/providers/base.py; the simulated
endpoint's behaviour is scenarios/providers/simulate.py.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, ConfigDict, Field, field_validator, model_validator

from scenarios.base import EnvVar, Name, StrictModel, Url
from scenarios.limits import MAX_ID_CHARS, MAX_INPUT_KEYS, MAX_URL_CHARS
from scenarios.providers.base import (
    EnforceOutputLength,
    ExtraBody,
    MetricsInterval,
    Pricing,
    ProviderBase,
    ServerEndpoint,
    bounded_json,
)
from scenarios.providers.cache_reset import CacheReset, cache_reset_url
from scenarios.providers.presets import hosted_preset, preset_names, resolve_preset
from scenarios.providers.simulate import SimulateSpec
from scenarios.security.egress import EgressDenied, url_host

CacheResetField = Field(
    default=None,
    description=(
        "Empty the server's prefix cache before each stage: vllm (POST "
        "/reset_prefix_cache), sglang (POST /flush_cache) or {url: ...} on the base_url's "
        "origin; self-hosted servers only (docs/providers.md, cache reset)."
    ),
)


class SelfHostedCache(ServerEndpoint):
    """A server whose prefix cache tokenbench may empty before each stage."""

    cache_reset: CacheReset | None = CacheResetField

    @model_validator(mode="after")
    def _reset_own_server(self) -> SelfHostedCache:
        if self.cache_reset is None:
            return self
        try:
            host = url_host(self.base_url)[1]
        except EgressDenied as exc:
            raise ValueError(f"cache_reset: {exc}") from None
        hosted = hosted_preset(host)
        if hosted is not None:
            raise ValueError(
                f"cache_reset: {host} is a hosted API (preset {hosted!r}): its cache is not "
                "ours to reset"
            )
        cache_reset_url(self.cache_reset, self.base_url)  # ValueError off the origin
        return self


class OpenAIProvider(SelfHostedCache):
    """Any OpenAI-compatible ``/v1/chat/completions`` endpoint (vLLM, SGLang, hosted APIs)."""

    kind: Literal["openai"] = Field(description="Provider adapter.")
    model: str = Field(
        min_length=1, max_length=MAX_ID_CHARS, description="Model id sent in each request."
    )
    enforce_output_length: EnforceOutputLength = False
    extra_body: ExtraBody = None


class SimulatedProvider(ProviderBase):
    """The built-in simulated endpoint, started on loopback by the worker for the run."""

    kind: Literal["simulated"] = Field(description="Provider adapter.")
    model: str = Field(
        default="simulated", min_length=1, max_length=MAX_ID_CHARS, description="Model id reported."
    )
    simulate: SimulateSpec = Field(default_factory=SimulateSpec, description="Its behaviour.")
    metrics_url: str | None = Field(
        default=None,
        pattern=r"^/\S*$",
        max_length=MAX_URL_CHARS,
        description=(
            "Path of the simulator's Prometheus endpoint to scrape during the run: /metrics "
            "(vLLM's names, from its batching model; docs/telemetry.md)."
        ),
    )
    metrics_interval_s: MetricsInterval = 1.0
    cache_reset: Literal["vllm"] | None = Field(
        default=None,
        description=(
            "vllm: empty the simulator's prefix cache before each stage (it serves vLLM's "
            "POST /reset_prefix_cache; docs/providers.md, cache reset)."
        ),
    )


class OpenAICompletionsProvider(SelfHostedCache):
    """An OpenAI-compatible legacy ``/v1/completions`` endpoint (plain prompt, no chat template)."""

    kind: Literal["openai-completions"] = Field(description="Provider adapter.")
    model: str = Field(
        min_length=1, max_length=MAX_ID_CHARS, description="Model id sent in each request."
    )
    enforce_output_length: EnforceOutputLength = False
    extra_body: ExtraBody = None


class AzureOpenAIProvider(ProviderBase):
    """Azure OpenAI chat completions: a deployment path, an ``api-version`` query and the
    ``api-key`` header instead of a bearer token."""

    kind: Literal["azure-openai"] = Field(description="Provider adapter.")
    endpoint: Url = Field(
        description="Resource endpoint, e.g. https://my-resource.openai.azure.com.",
    )
    model: str = Field(
        min_length=1, max_length=MAX_ID_CHARS, description="Model name recorded with each request."
    )
    deployment_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_ID_CHARS,
        description="Deployment name in the URL; default: model.",
    )
    api_version: str = Field(
        default="2024-10-21",
        min_length=1,
        max_length=MAX_ID_CHARS,
        description="The api-version query parameter.",
    )
    api_key_env: EnvVar = Field(description="Variable holding the resource key (api-key header).")

    def secret_env_vars(self) -> list[str]:
        """The api-key variable."""
        return [self.api_key_env]


class BedrockProvider(ProviderBase):
    """AWS Bedrock ``ConverseStream``: SigV4-signed requests (or a Bedrock API key) and
    binary ``application/vnd.amazon.eventstream`` responses."""

    kind: Literal["bedrock"] = Field(description="Provider adapter.")
    model: str = Field(
        min_length=1,
        max_length=MAX_ID_CHARS,
        description="Model or inference-profile id, e.g. us.meta.llama3-3-70b...",
    )
    region: str = Field(
        default="us-east-1", pattern=r"^[a-z]{2}(-[a-z]+)+-\d$", description="AWS region."
    )
    endpoint_url: Url | None = Field(
        default=None,
        description="Runtime endpoint; default https://bedrock-runtime.REGION.amazonaws.com.",
    )
    access_key_id_env: EnvVar = Field(
        default="AWS_ACCESS_KEY_ID", description="Variable holding the AWS access key id (SigV4)."
    )
    secret_access_key_env: EnvVar = Field(
        default="AWS_SECRET_ACCESS_KEY",
        description="Variable holding the AWS secret access key (SigV4).",
    )
    session_token_env: EnvVar | None = Field(
        default=None, description="Variable holding an AWS session token (temporary credentials)."
    )
    api_key_env: EnvVar | None = Field(
        default=None,
        description="Variable holding a Bedrock API key (Bearer); when set, SigV4 is not used.",
    )

    def secret_env_vars(self) -> list[str]:
        """The API key variable, or the SigV4 credential variables."""
        if self.api_key_env:
            return [self.api_key_env]
        names = [self.access_key_id_env, self.secret_access_key_env]
        return [*names, self.session_token_env] if self.session_token_env else names


class TGIProvider(ServerEndpoint):
    """Hugging Face text-generation-inference, native ``/generate_stream``."""

    kind: Literal["tgi"] = Field(description="Provider adapter.")
    model: str = Field(
        default="tgi",
        min_length=1,
        max_length=MAX_ID_CHARS,
        description="Model name recorded (TGI serves one).",
    )


class LlamaCppProvider(ServerEndpoint):
    """llama.cpp ``llama-server``, native ``/completion`` streaming with server timings."""

    kind: Literal["llamacpp"] = Field(description="Provider adapter.")
    model: str = Field(
        default="llamacpp",
        min_length=1,
        max_length=MAX_ID_CHARS,
        description="Model name recorded (the server has one).",
    )
    cache_prompt: bool = Field(
        default=False, description="Let the server reuse a cached prompt prefix (skews TTFT)."
    )
    enforce_output_length: EnforceOutputLength = False
    extra_body: ExtraBody = None


class ReplicateProvider(ProviderBase):
    """Replicate predictions API: create a prediction, then read its SSE stream URL."""

    kind: Literal["replicate"] = Field(description="Provider adapter.")
    base_url: Url = Field(default="https://api.replicate.com/v1", description="API base URL.")
    model: str = Field(
        pattern=r"^[\w.-]+/[\w.-]+(:[0-9a-f]{8,})?$",
        max_length=MAX_ID_CHARS,
        description="owner/name (official model) or owner/name:version.",
    )
    max_tokens_input: str = Field(
        default="max_tokens",
        min_length=1,
        max_length=MAX_ID_CHARS,
        description="Input field bounding the answer length.",
    )
    input: dict[str, str | int | float | bool] = Field(
        default_factory=dict,
        max_length=MAX_INPUT_KEYS,
        description="Extra model inputs sent with every prediction.",
    )
    api_key_env: EnvVar = Field(description="Variable holding the Replicate API token.")

    @field_validator("input")
    @classmethod
    def _small_input(
        cls, value: dict[str, str | int | float | bool]
    ) -> dict[str, str | int | float | bool]:
        return bounded_json(value)

    def secret_env_vars(self) -> list[str]:
        """The token variable."""
        return [self.api_key_env]


class AnthropicProvider(ServerEndpoint):
    """Anthropic's Messages API, ``POST {base_url}/v1/messages`` streamed as SSE; also any
    engine that serves that API (vLLM, gateways): set ``base_url`` to it."""

    kind: Literal["anthropic"] = Field(description="Provider adapter.")
    base_url: Url = Field(
        default="https://api.anthropic.com",
        description="Server root; /v1/messages is joined to it.",
    )
    model: str = Field(
        min_length=1, max_length=MAX_ID_CHARS, description="Model id sent in each request."
    )
    anthropic_version: str = Field(
        default="2023-06-01",
        pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
        description="The anthropic-version header.",
    )
    extra_body: ExtraBody = None


class OpenAIResponsesProvider(ServerEndpoint):
    """OpenAI's Responses API, ``POST {base_url}/responses`` with ``stream: true``."""

    kind: Literal["openai-responses"] = Field(description="Provider adapter.")
    base_url: Url = Field(
        default="https://api.openai.com/v1",
        description="Up to and including /v1; /responses is joined to it.",
    )
    model: str = Field(
        min_length=1, max_length=MAX_ID_CHARS, description="Model id sent in each request."
    )
    extra_body: ExtraBody = None


class GeminiProvider(ServerEndpoint):
    """Google's Gemini API, ``POST {base_url}/v1beta/models/{model}:streamGenerateContent``
    with ``alt=sse``; the key travels in the ``x-goog-api-key`` header, never the URL."""

    kind: Literal["gemini"] = Field(description="Provider adapter.")
    base_url: Url = Field(
        default="https://generativelanguage.googleapis.com",
        description="Server root; /v1beta/models/MODEL:streamGenerateContent is joined to it.",
    )
    model: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        max_length=MAX_ID_CHARS,
        description="Model id, e.g. gemini-2.5-flash (it is a path segment of the URL).",
    )
    include_thoughts: bool = Field(
        default=False,
        description=(
            "Ask for thought summaries (generationConfig.thinkingConfig.includeThoughts): "
            "thinking models only; their parts count for TTFT as reasoning."
        ),
    )
    extra_body: ExtraBody = None


class PresetReference(StrictModel):
    """A provider completed from the shipped preset catalog (``scenarios/providers/presets``): its
    kind, base URL, auth style and list prices. Any key of that kind may be given too and
    overrides the preset (``pricing`` included)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    preset: str = Field(
        max_length=MAX_ID_CHARS, description=f"Preset id, one of: {', '.join(preset_names())}."
    )
    model: str = Field(
        min_length=1, max_length=MAX_ID_CHARS, description="Model id at that provider."
    )
    name: Name | None = Field(default=None, description="Provider name; default: the preset id.")
    api_key_env: EnvVar | None = Field(
        default=None, description="Variable holding the key; default: the preset's usual name."
    )
    pricing: Pricing | None = Field(
        default=None, description="Overrides the catalog's list price for this model."
    )


AnyProvider = (
    OpenAIProvider
    | SimulatedProvider
    | OpenAICompletionsProvider
    | AzureOpenAIProvider
    | BedrockProvider
    | TGIProvider
    | LlamaCppProvider
    | ReplicateProvider
    | AnthropicProvider
    | OpenAIResponsesProvider
    | GeminiProvider
)
# ``preset: NAME`` entries are completed from the shipped catalog before the kind is
# looked at, so every later step sees a full provider of one of the kinds above.
Provider = Annotated[
    Annotated[AnyProvider, Field(discriminator="kind")],
    BeforeValidator(resolve_preset, json_schema_input_type=AnyProvider | PresetReference),
]
