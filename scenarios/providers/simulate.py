"""How the built-in simulated endpoint behaves: one model, ``simulate:`` of a ``simulated``
provider (and of a failover upstream), the simulator's command line and its wire spec.

Two latency models: a fixed TTFT and inter-token latency, or a continuous-batching server
whose step times follow the roofline of a catalog model (docs/roofline.md); faults on top
(docs/failover.md). ``workers/simulator`` serves it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from scenarios.base import StrictModel
from scenarios.catalog import UnknownIdError, default_catalog
from scenarios.limits import (
    MAX_BATCH,
    MAX_CONTEXT_TOKENS,
    MAX_FAULTS,
    MAX_GPU_WATTS,
    MAX_GPUS,
    MAX_ID_CHARS,
    MAX_IMAGE_SIDE,
    MAX_LATENCY_MS,
    MAX_PREFILL_TOKENS,
    MAX_PROMPT_TOKEN_RATIO,
    MAX_REQUEST_LOG,
    MAX_SPEC_DECODE_TOKENS,
    MAX_TOKENS_PER_CHUNK,
    Seed,
)
from scenarios.providers.faults import Fault
from scenarios.roofline import memory_fit, resolve_deployment
from scenarios.tokenizers.ref import TokenizerRef

# http(s) to a loopback host: the simulator's span export reaches nothing beyond its machine.
_LOOPBACK_URL = r"^https?://(127\.0\.0\.1|localhost|\[::1\])(:[0-9]{1,5})?(/[A-Za-z0-9._~/-]*)?$"


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
    seed: Seed = Field(default=0, description="Seed of the fault draws.")
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
    spec_decode_acceptance: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description=(
            "Serve vLLM's speculative-decoding counters at /metrics (docs/telemetry.md): each "
            "decode step drafts spec_decode_tokens tokens, each accepted with this "
            "probability (seeded), and emits the accepted ones plus one; null: none. Token "
            "timing is unchanged."
        ),
    )
    spec_decode_tokens: int = Field(
        default=3,
        ge=1,
        le=MAX_SPEC_DECODE_TOKENS,
        description="Draft tokens per speculative-decoding step (vLLM's num_speculative_tokens).",
    )
    gpu_power: bool = Field(
        default=False,
        description=(
            "Serve a DCGM exporter's DCGM_FI_DEV_POWER_USAGE (watts) per GPU at /metrics, "
            "modelled from load: gpu_idle_watts plus (gpu_max_watts - gpu_idle_watts) times "
            "the share of the batch in use (the fixed latency model: 1 while any request "
            "runs); gpus devices with the batching model, one otherwise."
        ),
    )
    gpu_idle_watts: float = Field(
        default=100.0, ge=0, le=MAX_GPU_WATTS, description="A simulated GPU's draw when idle."
    )
    gpu_max_watts: float = Field(
        default=700.0,
        ge=0,
        le=MAX_GPU_WATTS,
        description="A simulated GPU's draw with its batch full (at least gpu_idle_watts).",
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

    otlp_traces_url: str | None = Field(
        default=None,
        max_length=MAX_ID_CHARS,
        pattern=_LOOPBACK_URL,
        description=(
            "Export an OTLP span per streamed answer (vLLM's attribute names, its request "
            "id the stream's id) to this OTLP/HTTP traces URL, e.g. a control plane's "
            "/v1/otlp/v1/traces on the same machine: loopback only (docs/traces.md)."
        ),
    )
    otlp_token_env: str | None = Field(
        default=None,
        pattern=r"^TOKENBENCH_OTLP_[A-Z0-9_]{0,64}$",
        description=(
            "Environment variable of the simulator's process holding the bearer token the "
            "span export sends; only names starting TOKENBENCH_OTLP_, so no other secret "
            "of a worker can be sent with it."
        ),
    )
    otlp_service_name: str | None = Field(
        default=None,
        max_length=MAX_ID_CHARS,
        description=(
            "The spans' service.name: the name of the provider they are for (the receiver "
            "stores a span only for runs naming that provider)."
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
        if self.gpu_max_watts < self.gpu_idle_watts:
            raise ValueError("gpu_max_watts must be at least gpu_idle_watts")
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
