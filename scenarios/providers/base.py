"""What every provider kind shares: list prices, a self-hosted deployment, 429 retries,
request deadlines, a scraped Prometheus endpoint, the URL and key-variable fields of a
server reached over HTTP, and joining a base URL with a path.

A provider kind (scenarios/providers/kinds.py) is built from these; a field two kinds share is
declared here once.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, Field

from scenarios.base import EnvVar, Name, StrictModel, Url
from scenarios.limits import (
    MAX_CONNECT_TIMEOUT_S,
    MAX_EXTRA_BODY_BYTES,
    MAX_GPU_HOUR_USD,
    MAX_GPUS,
    MAX_ID_CHARS,
    MAX_METRICS_INTERVAL_S,
    MAX_PRICE_PER_MTOK_USD,
    MAX_REQUEST_TIMEOUT_S,
    MAX_RETRY_WAIT_S,
    MIN_METRICS_INTERVAL_S,
)

_JsonT = TypeVar("_JsonT")


def join_url(base_url: str, path: str) -> str:
    """``path`` under ``base_url``: one ``/`` between them, whatever either brings
    (``http://h/v1/`` and ``/chat/completions`` give ``http://h/v1/chat/completions``)."""
    return base_url.rstrip("/") + "/" + path.lstrip("/")


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
    cached_input_per_mtok: float | None = Field(
        default=None,
        ge=0,
        le=MAX_PRICE_PER_MTOK_USD,
        description=(
            "USD per 1M prompt tokens read from the provider's prompt cache (usage's "
            "cached tokens); unset: cached tokens cost input_per_mtok (docs/analytics.md)."
        ),
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
    shared: bool = Field(
        default=False,
        description=(
            "Measure this endpoint while other runs may use it too: the control plane "
            "takes no lease on it (docs/teams.md, endpoint leases), and the report names "
            "the runs that overlapped it. For a hosted API whose other traffic is unknown "
            "anyway; off by default, so two runs never measure one endpoint unawares."
        ),
    )

    def secret_env_vars(self) -> list[str]:
        """Names of the environment variables this provider reads its credentials from."""
        return []

    def endpoint_urls(self) -> list[str]:
        """URLs the worker will connect to, for the egress policy (none for endpoints the
        worker starts itself). Kinds with a ``base_url`` field are covered here."""
        base_url = getattr(self, "base_url", None)
        return [base_url] if isinstance(base_url, str) else []


MetricsInterval = Annotated[
    float,
    Field(
        ge=MIN_METRICS_INTERVAL_S,
        le=MAX_METRICS_INTERVAL_S,
        description="Seconds between scrapes of metrics_url (docs/telemetry.md).",
    ),
]


class ScrapedMetrics(StrictModel):
    """A self-hosted server's Prometheus endpoint, scraped while its shards run
    (docs/telemetry.md): queue depth, KV-cache use, token counters, GPU figures."""

    metrics_url: Url | None = Field(
        default=None,
        description=(
            "Prometheus endpoint of the server (vLLM, SGLang, TGI, llama.cpp) or its "
            "node's DCGM exporter, e.g. http://10.0.0.5:8000/metrics; scraped during the run."
        ),
    )
    metrics_interval_s: MetricsInterval = 1.0
    metrics_api_key_env: EnvVar | None = Field(
        default=None,
        description=(
            "Variable holding a bearer token for metrics_url, if it needs one (bound to "
            "its host like any key, docs/security.md)."
        ),
    )

    def metrics_secret_env_vars(self) -> list[str]:
        """The metrics token variable, if any."""
        return [self.metrics_api_key_env] if self.metrics_api_key_env else []


class ServerEndpoint(ProviderBase, ScrapedMetrics):
    """A server reached at ``base_url`` with an optional bearer key, whose Prometheus
    endpoint may be scraped: what the openai, openai-completions, tgi and llamacpp kinds
    share."""

    base_url: Url = Field(
        description=(
            "Where the adapter's path is joined: up to and including /v1 for the OpenAI "
            "dialects (http://127.0.0.1:8000/v1), the server root for tgi and llamacpp "
            "(http://127.0.0.1:8080)."
        )
    )
    api_key_env: EnvVar | None = Field(
        default=None,
        description=(
            "Name of the environment variable holding the bearer key, if the server needs "
            "one (never the key itself)."
        ),
    )

    def secret_env_vars(self) -> list[str]:
        """The key variable and the metrics token variable, if any."""
        return ([self.api_key_env] if self.api_key_env else []) + self.metrics_secret_env_vars()
