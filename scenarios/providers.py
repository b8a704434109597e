"""Provider kinds of a scenario, one model each, chosen by the ``kind`` discriminator.

A new adapter adds its model here (and to ``Provider``) and registers its client under
the same ``kind`` in ``workers/client/adapters``; callers never branch on the kind.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from scenarios.base import ENV_VAR_PATTERN, Name, StrictModel
from scenarios.catalog import UnknownIdError, default_catalog
from scenarios.faults import Fault
from scenarios.limits import (
    MAX_BATCH,
    MAX_CONNECT_TIMEOUT_S,
    MAX_CONTEXT_TOKENS,
    MAX_EXTRA_BODY_BYTES,
    MAX_FAULTS,
    MAX_GPU_HOUR_USD,
    MAX_GPUS,
    MAX_ID_CHARS,
    MAX_IMAGE_SIDE,
    MAX_INPUT_KEYS,
    MAX_LATENCY_MS,
    MAX_METRICS_INTERVAL_S,
    MAX_PREFILL_TOKENS,
    MAX_PRICE_PER_MTOK_USD,
    MAX_PROMPT_TOKEN_RATIO,
    MAX_REQUEST_LOG,
    MAX_REQUEST_TIMEOUT_S,
    MAX_RETRY_WAIT_S,
    MAX_SEED,
    MAX_TOKENS_PER_CHUNK,
    MAX_URL_CHARS,
    MIN_METRICS_INTERVAL_S,
    MIN_SEED,
)
from scenarios.presets import preset_names, resolve_preset
from scenarios.roofline import memory_fit, resolve_deployment
from scenarios.tokenizer_ref import TokenizerRef

_JsonT = TypeVar("_JsonT")


def bounded_json(value: _JsonT) -> _JsonT:
    """``value`` if it is plain JSON of finite numbers and at most MAX_EXTRA_BODY_BYTES
    serialized: it is sent with every request, so it must stay small."""
    try:
        size = len(json.dumps(value, allow_nan=False, separators=(",", ":")))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"must be plain JSON with finite numbers: {exc}") from None
    if size > MAX_EXTRA_BODY_BYTES:
        raise ValueError(
            f"is {size} bytes as JSON, more than the {MAX_EXTRA_BODY_BYTES} sent with every request"
        )
    return value


def _small_body(value: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if value is None else bounded_json(value)


# Request-body options of the dialects served by self-hosted engines (openai,
# openai-completions, llamacpp): docs/providers.md, "Output length knobs".
EnforceOutputLength = Annotated[
    bool,
    Field(
        description=(
            "Also send the knobs that force the planned answer length: ignore_eos and "
            "min_tokens = max_tokens (openai, openai-completions: vLLM/SGLang; "
            "llama-cpp-python honours min_tokens only), ignore_eos (llamacpp, whose "
            "n_predict is the planned length). Hosted APIs may reject them."
        )
    ),
]
ExtraBody = Annotated[
    dict[str, Any] | None,
    AfterValidator(_small_body),
    Field(description="Extra JSON fields merged into every request body."),
]


class Pricing(StrictModel):
    """List price of a hosted API, in US dollars per million tokens."""

    input_per_mtok: float = Field(
        ge=0, le=MAX_PRICE_PER_MTOK_USD, description="USD per 1M prompt tokens."
    )
    output_per_mtok: float = Field(
        ge=0, le=MAX_PRICE_PER_MTOK_USD, description="USD per 1M completion tokens."
    )


class SimulateSpec(StrictModel):
    """Behaviour of the built-in simulated endpoint, plus optional faults.

    Two latency models, chosen by ``model``: unset, a fixed ``ttft_ms``/``itl_ms``; set, a
    continuous-batching server whose step times follow the roofline of ``model`` on
    ``gpus`` × ``hardware`` (docs/roofline.md). Catalog ids are checked against the
    shipped catalogs, so a typo fails validation with the field's path.
    """

    ttft_ms: float = Field(
        default=100.0, ge=0, le=MAX_LATENCY_MS, description="Time to first token."
    )
    itl_ms: float = Field(
        default=10.0, ge=0, le=MAX_LATENCY_MS, description="Time per output token."
    )
    tokens_per_chunk: int = Field(
        default=1, ge=1, le=MAX_TOKENS_PER_CHUNK, description="Tokens carried per SSE event."
    )
    error_rate: float = Field(default=0.0, ge=0, le=1, description="Share answered with an error.")
    error_status: int = Field(default=500, ge=400, le=599, description="HTTP status of errors.")
    stall_rate: float = Field(default=0.0, ge=0, le=1, description="Share that stall first.")
    stall_ms: float = Field(
        default=0.0, ge=0, le=MAX_LATENCY_MS, description="Stall before the first token."
    )
    cut_rate: float = Field(default=0.0, ge=0, le=1, description="Share cut off mid-stream.")
    unfinished_rate: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description=(
            "Share of streamed answers that stop halfway and end with [DONE] but no "
            "finish_reason (as a proxy hiding an aborted generation does)."
        ),
    )
    stream_usage: bool = Field(
        default=True,
        description=(
            "Send the usage chunk a streaming request asks for (stream_options."
            "include_usage); false streams none, as llama-cpp-python's server does."
        ),
    )
    seed: int = Field(default=0, ge=MIN_SEED, le=MAX_SEED, description="Seed of the fault draws.")
    tool_call_rate: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description=(
            "Share of requests carrying tools (tool_choice auto) answered with a streamed "
            "tool call; tool_choice required or a named function always is, none never."
        ),
    )
    prefill_ms_per_token: float = Field(
        default=0.0,
        ge=0,
        le=MAX_LATENCY_MS,
        description=(
            "Fixed latency model: time added to the first token per prompt token it must "
            "prefill (not cached), so TTFT grows with the prompt."
        ),
    )
    prefix_cache: bool = Field(
        default=False,
        description=(
            "Keep the prompts and answers served (in blocks of 16 words, LRU): a request "
            "that starts with words seen before prefills only the rest, and usage reports "
            "prompt_tokens_details.cached_tokens (docs/workloads.md)."
        ),
    )
    prefix_cache_words: int = Field(
        default=1_000_000,
        ge=1,
        le=MAX_CONTEXT_TOKENS,
        description="Words the prefix cache holds before it evicts the least recently used.",
    )
    model: str | None = Field(
        default=None,
        max_length=MAX_ID_CHARS,
        description=(
            "Catalog model id (e.g. llama-3.1-405b). When set, token timing comes from a "
            "continuous-batching model of this deployment instead of ttft_ms/itl_ms."
        ),
    )
    quant: str = Field(
        default="fp16",
        max_length=MAX_ID_CHARS,
        description="Weight format catalog id (fp16, fp8, ...).",
    )
    kv_dtype: str = Field(
        default="fp16",
        max_length=MAX_ID_CHARS,
        description="KV-cache dtype catalog id (fp16, fp8).",
    )
    hardware: str = Field(
        default="h100",
        max_length=MAX_ID_CHARS,
        description="Hardware catalog id (h100, h200, ...).",
    )
    gpus: int = Field(
        default=1, ge=1, le=MAX_GPUS, description="Devices serving the model, tensor-parallel."
    )
    efficiency: float = Field(
        default=0.6,
        gt=0,
        le=1,
        description="Share of peak bandwidth and FLOP/s a step reaches (real stacks ~0.5-0.8).",
    )
    mfu: float = Field(
        default=0.5, gt=0, le=1, description="Model FLOP/s utilisation while prefilling prompts."
    )
    step_overhead_ms: float = Field(
        default=0.0,
        ge=0,
        le=MAX_LATENCY_MS,
        description="Fixed time added to every step (scheduling, all-reduce).",
    )
    context: int = Field(
        default=8192,
        ge=2,
        le=MAX_CONTEXT_TOKENS,
        description=(
            "Tokens reserved per sequence (max model length): the KV cache holds as many "
            "sequences as fit at this context, the rest queue; longer requests are cut to it."
        ),
    )
    max_batch: int = Field(
        default=256,
        ge=1,
        le=MAX_BATCH,
        description="Most sequences running at once (vLLM's max_num_seqs).",
    )
    chunked_prefill_tokens: int | None = Field(
        default=None,
        ge=1,
        le=MAX_PREFILL_TOKENS,
        description=(
            "Token budget per step with chunked prefill (decodes first, prompt chunks fill "
            "the rest); null: whole prompts are prefilled in steps of their own."
        ),
    )
    prompt_token_ratio: float = Field(
        default=1.0,
        gt=0,
        le=MAX_PROMPT_TOKEN_RATIO,
        description=(
            "Prompt tokens the endpoint reports per whitespace-separated word (1.3 is "
            "English BPE); unused with prompt_tokenizer."
        ),
    )
    prompt_tokenizer: TokenizerRef | None = Field(
        default=None,
        description=(
            "Count prompt tokens with this tokenizer (a hub name from the worker's cache, "
            "or a local path in the local user's runs), as a real server would."
        ),
    )

    image_token_rule: Literal["tiles", "patches"] = Field(
        default="tiles",
        description=(
            "How image tokens are counted (docs/workloads.md): tiles, 85 + 170 per 512-px "
            "tile after scaling into 2048 px and the short side to 768 px (detail low: 85); "
            "patches, one token per image_patch_px square."
        ),
    )
    image_patch_px: int = Field(
        default=28,
        ge=1,
        le=MAX_IMAGE_SIDE,
        description="Side of the square one image token covers with the patches rule.",
    )
    report_image_tokens: bool = Field(
        default=True,
        description=(
            "Report image and text tokens apart in usage.prompt_tokens_details, as some "
            "gateways do; false reports only their sum in prompt_tokens, as OpenAI and vLLM do."
        ),
    )
    faults: list[Fault] = Field(
        default_factory=list,
        max_length=MAX_FAULTS,
        description=(
            "Faults injected on top of the *_rate fields: http_429, http_5xx, reset, stall "
            "or cut, on a seeded share of requests (rate) and/or in periodic bursts "
            "(burst: every_s, for_s, offset_s) timed from the first chat request "
            "(docs/failover.md)."
        ),
    )
    request_log: int = Field(
        default=100_000,
        ge=0,
        le=MAX_REQUEST_LOG,
        description=(
            "Chat requests kept in the endpoint's log (GET /tokenbench/requests: id, "
            "prompt hash, outcome, time); the oldest are dropped beyond it, and counted."
        ),
    )

    @field_validator("prompt_tokenizer")
    @classmethod
    def _tokenizer_source(cls, value: TokenizerRef | None) -> TokenizerRef | None:
        if value is not None and value.dataset is not None:
            raise ValueError("the simulator reads a hub name or a local path, not a dataset")
        return value

    @field_validator("model", "quant", "kv_dtype", "hardware")
    @classmethod
    def _known_id(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        catalog = default_catalog()
        lookup = {
            "model": catalog.get_model,
            "quant": catalog.get_quantization,
            "kv_dtype": catalog.get_kv_dtype,
            "hardware": catalog.get_hardware,
        }[info.field_name or ""]
        try:
            return lookup(value).id
        except UnknownIdError as exc:
            raise ValueError(str(exc)) from None

    @model_validator(mode="after")
    def _one_latency_model(self) -> SimulateSpec:
        # Compared by value, not by model_fields_set: specs travel as full JSON dumps
        # (worker messages, the simulator's command line), which set every field.
        fields = type(self).model_fields
        if self.model is None:
            stray = [
                name for name in _ROOFLINE_FIELDS if getattr(self, name) != fields[name].default
            ]
            if stray:
                raise ValueError(f"set model to use {', '.join(stray)} (the batching simulator)")
            return self
        fixed = [
            name
            for name in ("ttft_ms", "itl_ms", "prefill_ms_per_token")
            if getattr(self, name) != fields[name].default
        ]
        if fixed:
            raise ValueError(
                f"{' and '.join(fixed)} cannot be combined with model (roofline timing)"
            )
        catalog = default_catalog()
        deployment = resolve_deployment(
            catalog,
            model=self.model,
            quant=self.quant,
            hardware=self.hardware,
            gpus=self.gpus,
            kv_dtype=self.kv_dtype,
        )
        if self.context > deployment.model.context_tokens:
            raise ValueError(
                f"context {self.context} exceeds {self.model}'s "
                f"{deployment.model.context_tokens} tokens"
            )
        fit = memory_fit(deployment, self.context)
        if not fit.fits:
            raise ValueError(
                f"{self.model} ({self.quant}) does not fit {self.gpus} × {self.hardware} at "
                f"context {self.context}: try more gpus, a smaller quant or a shorter context"
            )
        running = min(self.max_batch, fit.max_sequences)
        if self.chunked_prefill_tokens is not None and self.chunked_prefill_tokens < running:
            raise ValueError(
                f"chunked_prefill_tokens must be at least {running}, the running batch "
                "(max_batch or the KV capacity): every running sequence decodes in each step"
            )
        return self


_ROOFLINE_FIELDS = (
    "quant",
    "kv_dtype",
    "hardware",
    "gpus",
    "efficiency",
    "mfu",
    "step_overhead_ms",
    "context",
    "max_batch",
    "chunked_prefill_tokens",
)


class Deployment(StrictModel):
    """How a self-hosted endpoint is deployed: for roofline efficiency and cost per token."""

    hardware: str = Field(
        min_length=1, max_length=MAX_ID_CHARS, description="Hardware catalog id, e.g. h100, h200."
    )
    gpus: int = Field(ge=1, le=MAX_GPUS, description="GPUs serving one replica (tensor parallel).")
    quantization: str = Field(
        default="fp16", max_length=MAX_ID_CHARS, description="Quantization catalog id of weights."
    )
    model: str | None = Field(
        default=None,
        max_length=MAX_ID_CHARS,
        description="Model catalog id (e.g. llama-3.1-405b) for the roofline.",
    )
    gpu_hour_usd: float | None = Field(
        default=None,
        ge=0,
        le=MAX_GPU_HOUR_USD,
        description="USD per GPU-hour; default from the hardware catalog.",
    )


class RetryPolicy(StrictModel):
    """Opt-in retries of HTTP 429: wait as the server's ``Retry-After`` says, or back off
    exponentially when it says nothing; retries and time waited are recorded per request."""

    max_retries: int = Field(default=3, ge=1, le=20, description="Retries after the first try.")
    max_wait_s: float = Field(
        default=30.0,
        gt=0,
        le=MAX_RETRY_WAIT_S,
        description="Most time one request may wait between tries; a longer Retry-After ends it.",
    )
    initial_backoff_s: float = Field(
        default=0.5,
        gt=0,
        le=MAX_RETRY_WAIT_S,
        description="First wait when the server sends no Retry-After; doubles.",
    )


class ProviderBase(StrictModel):
    """Fields every provider kind shares."""

    name: Name = Field(description="Unique name of this provider in the scenario.")
    pricing: Pricing | None = Field(default=None, description="List prices, for cost.")
    deployment: Deployment | None = Field(
        default=None, description="Self-hosted deployment, for efficiency and cost per token."
    )
    timeout_s: float = Field(
        default=300.0,
        gt=0,
        le=MAX_REQUEST_TIMEOUT_S,
        description="Deadline for a whole request, send to end of stream.",
    )
    stall_timeout_s: float = Field(
        default=60.0,
        gt=0,
        le=MAX_REQUEST_TIMEOUT_S,
        description="Longest silence allowed between response bytes.",
    )
    connect_timeout_s: float = Field(
        default=10.0, gt=0, le=MAX_CONNECT_TIMEOUT_S, description="TCP/TLS connect deadline."
    )
    retry: RetryPolicy | None = Field(
        default=None,
        description="Retry HTTP 429 answers (off by default: rate limiting is an error).",
    )

    def secret_env_vars(self) -> list[str]:
        """Names of the environment variables this provider reads its credentials from."""
        return []

    def endpoint_urls(self) -> list[str]:
        """URLs the worker will connect to, for the egress policy (none for endpoints the
        worker starts itself). Kinds with a ``base_url`` field are covered here."""
        base_url = getattr(self, "base_url", None)
        return [base_url] if isinstance(base_url, str) else []


_METRICS_INTERVAL = Field(
    default=1.0,
    ge=MIN_METRICS_INTERVAL_S,
    le=MAX_METRICS_INTERVAL_S,
    description="Seconds between scrapes of metrics_url (docs/telemetry.md).",
)


class ScrapedMetrics(StrictModel):
    """A self-hosted server's Prometheus endpoint, scraped while its shards run
    (docs/telemetry.md): queue depth, KV-cache use, token counters, GPU figures."""

    metrics_url: str | None = Field(
        default=None,
        pattern=r"^https?://[^\s/]+(/\S*)?$",
        max_length=MAX_URL_CHARS,
        description=(
            "Prometheus endpoint of the server (vLLM, SGLang, TGI, llama.cpp) or its "
            "node's DCGM exporter, e.g. http://10.0.0.5:8000/metrics; scraped during the run."
        ),
    )
    metrics_interval_s: float = _METRICS_INTERVAL
    metrics_api_key_env: str | None = Field(
        default=None,
        pattern=ENV_VAR_PATTERN,
        max_length=MAX_ID_CHARS,
        description=(
            "Variable holding a bearer token for metrics_url, if it needs one (bound to "
            "its host like any key, docs/security.md)."
        ),
    )

    def metrics_secret_env_vars(self) -> list[str]:
        """The metrics token variable, if any."""
        return [self.metrics_api_key_env] if self.metrics_api_key_env else []


class OpenAIProvider(ProviderBase, ScrapedMetrics):
    """Any OpenAI-compatible ``/v1/chat/completions`` endpoint (vLLM, SGLang, hosted APIs)."""

    kind: Literal["openai"] = Field(description="Provider adapter.")
    base_url: str = Field(
        pattern=r"^https?://[^\s/]+(/\S*)?$",
        max_length=MAX_URL_CHARS,
        description="Base URL up to and including /v1, e.g. http://127.0.0.1:8000/v1.",
    )
    model: str = Field(
        min_length=1, max_length=MAX_ID_CHARS, description="Model id sent in each request."
    )
    api_key_env: str | None = Field(
        default=None,
        pattern=ENV_VAR_PATTERN,
        max_length=MAX_ID_CHARS,
        description="Name of the environment variable holding the API key (never the key).",
    )
    enforce_output_length: EnforceOutputLength = False
    extra_body: ExtraBody = None

    def secret_env_vars(self) -> list[str]:
        """The API key variable and the metrics token variable, if any."""
        return ([self.api_key_env] if self.api_key_env else []) + self.metrics_secret_env_vars()


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
    metrics_interval_s: float = _METRICS_INTERVAL


_URL = r"^https?://[^\s/]+(/\S*)?$"


# The name of an environment variable holding a credential (never the credential itself).
EnvVar = Annotated[str, Field(pattern=ENV_VAR_PATTERN, max_length=MAX_ID_CHARS)]


class OpenAICompletionsProvider(ProviderBase, ScrapedMetrics):
    """An OpenAI-compatible legacy ``/v1/completions`` endpoint (plain prompt, no chat template)."""

    kind: Literal["openai-completions"] = Field(description="Provider adapter.")
    base_url: str = Field(
        pattern=_URL, max_length=MAX_URL_CHARS, description="Base URL up to and including /v1."
    )
    model: str = Field(
        min_length=1, max_length=MAX_ID_CHARS, description="Model id sent in each request."
    )
    api_key_env: EnvVar | None = Field(
        default=None, description="Variable holding the API key (Bearer)."
    )
    enforce_output_length: EnforceOutputLength = False
    extra_body: ExtraBody = None

    def secret_env_vars(self) -> list[str]:
        """The API key variable and the metrics token variable, if any."""
        return ([self.api_key_env] if self.api_key_env else []) + self.metrics_secret_env_vars()


class AzureOpenAIProvider(ProviderBase):
    """Azure OpenAI chat completions: a deployment path, an ``api-version`` query and the
    ``api-key`` header instead of a bearer token."""

    kind: Literal["azure-openai"] = Field(description="Provider adapter.")
    endpoint: str = Field(
        pattern=_URL,
        max_length=MAX_URL_CHARS,
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
    api_key_env: str = Field(
        pattern=ENV_VAR_PATTERN,
        max_length=MAX_ID_CHARS,
        description="Variable holding the resource key (api-key header).",
    )

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
    endpoint_url: str | None = Field(
        default=None,
        pattern=_URL,
        max_length=MAX_URL_CHARS,
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


class TGIProvider(ProviderBase, ScrapedMetrics):
    """Hugging Face text-generation-inference, native ``/generate_stream``."""

    kind: Literal["tgi"] = Field(description="Provider adapter.")
    base_url: str = Field(
        pattern=_URL,
        max_length=MAX_URL_CHARS,
        description="Server root, e.g. http://127.0.0.1:8080.",
    )
    model: str = Field(
        default="tgi",
        min_length=1,
        max_length=MAX_ID_CHARS,
        description="Model name recorded (TGI serves one).",
    )
    api_key_env: EnvVar | None = Field(
        default=None, description="Variable holding a bearer token, if the server needs one."
    )

    def secret_env_vars(self) -> list[str]:
        """The token variable and the metrics token variable, if any."""
        return ([self.api_key_env] if self.api_key_env else []) + self.metrics_secret_env_vars()


class LlamaCppProvider(ProviderBase, ScrapedMetrics):
    """llama.cpp ``llama-server``, native ``/completion`` streaming with server timings."""

    kind: Literal["llamacpp"] = Field(description="Provider adapter.")
    base_url: str = Field(
        pattern=_URL,
        max_length=MAX_URL_CHARS,
        description="Server root, e.g. http://127.0.0.1:8080.",
    )
    model: str = Field(
        default="llamacpp",
        min_length=1,
        max_length=MAX_ID_CHARS,
        description="Model name recorded (the server has one).",
    )
    cache_prompt: bool = Field(
        default=False, description="Let the server reuse a cached prompt prefix (skews TTFT)."
    )
    api_key_env: EnvVar | None = Field(
        default=None, description="Variable holding the server's --api-key, if it has one."
    )
    enforce_output_length: EnforceOutputLength = False
    extra_body: ExtraBody = None

    def secret_env_vars(self) -> list[str]:
        """The key variable and the metrics token variable, if any."""
        return ([self.api_key_env] if self.api_key_env else []) + self.metrics_secret_env_vars()


class ReplicateProvider(ProviderBase):
    """Replicate predictions API: create a prediction, then read its SSE stream URL."""

    kind: Literal["replicate"] = Field(description="Provider adapter.")
    base_url: str = Field(
        default="https://api.replicate.com/v1",
        pattern=_URL,
        max_length=MAX_URL_CHARS,
        description="API base URL.",
    )
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
    api_key_env: str = Field(
        pattern=ENV_VAR_PATTERN,
        max_length=MAX_ID_CHARS,
        description="Variable holding the Replicate API token.",
    )

    @field_validator("input")
    @classmethod
    def _small_input(
        cls, value: dict[str, str | int | float | bool]
    ) -> dict[str, str | int | float | bool]:
        return bounded_json(value)

    def secret_env_vars(self) -> list[str]:
        """The token variable."""
        return [self.api_key_env]


class PresetReference(StrictModel):
    """A provider completed from the shipped preset catalog (``scenarios/presets``): its
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
)
# ``preset: NAME`` entries are completed from the shipped catalog before the kind is
# looked at, so every later step sees a full provider of one of the kinds above.
Provider = Annotated[
    Annotated[AnyProvider, Field(discriminator="kind")],
    BeforeValidator(resolve_preset, json_schema_input_type=AnyProvider | PresetReference),
]
