"""Provider kinds of a scenario, one model each, chosen by the ``kind`` discriminator.

A new adapter adds its model here (and to ``Provider``) and registers its client under
the same ``kind`` in ``workers/client/adapters``; callers never branch on the kind.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from scenarios.base import ENV_VAR_PATTERN, Name, StrictModel


class Pricing(StrictModel):
    """List price of a hosted API, in US dollars per million tokens."""

    input_per_mtok: float = Field(ge=0, description="USD per 1M prompt tokens.")
    output_per_mtok: float = Field(ge=0, description="USD per 1M completion tokens.")


class SimulateSpec(StrictModel):
    """Behaviour of the built-in simulated endpoint (fixed latency plus optional faults)."""

    ttft_ms: float = Field(default=100.0, ge=0, description="Time to first token.")
    itl_ms: float = Field(default=10.0, ge=0, description="Time per output token.")
    tokens_per_chunk: int = Field(default=1, ge=1, description="Tokens carried per SSE event.")
    error_rate: float = Field(default=0.0, ge=0, le=1, description="Share answered with an error.")
    error_status: int = Field(default=500, ge=400, le=599, description="HTTP status of errors.")
    stall_rate: float = Field(default=0.0, ge=0, le=1, description="Share that stall first.")
    stall_ms: float = Field(default=0.0, ge=0, description="Stall before the first token.")
    cut_rate: float = Field(default=0.0, ge=0, le=1, description="Share cut off mid-stream.")
    seed: int = Field(default=0, description="Seed of the fault draws.")


class Deployment(StrictModel):
    """How a self-hosted endpoint is deployed: for roofline efficiency and cost per token."""

    hardware: str = Field(min_length=1, description="Hardware catalog id, e.g. h100, h200.")
    gpus: int = Field(ge=1, description="GPUs serving one replica (tensor parallel).")
    quantization: str = Field(default="fp16", description="Quantization catalog id of weights.")
    model: str | None = Field(
        default=None, description="Model catalog id (e.g. llama-3.1-405b) for the roofline."
    )
    gpu_hour_usd: float | None = Field(
        default=None, ge=0, description="USD per GPU-hour; default from the hardware catalog."
    )


class ProviderBase(StrictModel):
    """Fields every provider kind shares."""

    name: Name = Field(description="Unique name of this provider in the scenario.")
    pricing: Pricing | None = Field(default=None, description="List prices, for cost.")
    deployment: Deployment | None = Field(
        default=None, description="Self-hosted deployment, for efficiency and cost per token."
    )
    timeout_s: float = Field(
        default=300.0, gt=0, description="Deadline for a whole request, send to end of stream."
    )
    stall_timeout_s: float = Field(
        default=60.0, gt=0, description="Longest silence allowed between response bytes."
    )
    connect_timeout_s: float = Field(default=10.0, gt=0, description="TCP/TLS connect deadline.")

    def secret_env_vars(self) -> list[str]:
        """Names of the environment variables this provider reads its credentials from."""
        return []


class OpenAIProvider(ProviderBase):
    """Any OpenAI-compatible ``/v1/chat/completions`` endpoint (vLLM, SGLang, hosted APIs)."""

    kind: Literal["openai"] = Field(description="Provider adapter.")
    base_url: str = Field(
        pattern=r"^https?://[^\s/]+(/\S*)?$",
        description="Base URL up to and including /v1, e.g. http://127.0.0.1:8000/v1.",
    )
    model: str = Field(min_length=1, description="Model id sent in each request.")
    api_key_env: str | None = Field(
        default=None,
        pattern=ENV_VAR_PATTERN,
        description="Name of the environment variable holding the API key (never the key).",
    )

    def secret_env_vars(self) -> list[str]:
        """The API key variable, if any."""
        return [self.api_key_env] if self.api_key_env else []


class SimulatedProvider(ProviderBase):
    """The built-in simulated endpoint, started on loopback by the worker for the run."""

    kind: Literal["simulated"] = Field(description="Provider adapter.")
    model: str = Field(default="simulated", min_length=1, description="Model id reported.")
    simulate: SimulateSpec = Field(default_factory=SimulateSpec, description="Its behaviour.")


AnyProvider = OpenAIProvider | SimulatedProvider
Provider = Annotated[AnyProvider, Field(discriminator="kind")]
