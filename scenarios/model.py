"""The benchmark scenario: one pydantic model, the public contract of tokenbench.

Key names here are what users write in YAML/JSON; fields may be added, never renamed.
Every model forbids unknown keys so that a typo is an error naming its path, not a
silently ignored setting. Variants (provider kinds, length distributions) are chosen
by a discriminator field, never by ``if kind == ...`` chains in callers.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from scenarios.base import Name, StrictModel
from scenarios.providers import (
    AnyProvider,
    Deployment,
    OpenAIProvider,
    Pricing,
    Provider,
    ProviderBase,
    SimulatedProvider,
    SimulateSpec,
)

__all__ = [
    "SLO",
    "AnyProvider",
    "Deployment",
    "FixedLength",
    "LengthDist",
    "Load",
    "LognormalLength",
    "MixClass",
    "NormalLength",
    "OpenAIProvider",
    "Pricing",
    "Provider",
    "ProviderBase",
    "Scenario",
    "SimulateSpec",
    "SimulatedProvider",
    "UniformLength",
    "Workload",
]


# --------------------------------------------------------------------------- lengths


class FixedLength(StrictModel):
    """Always the same number of tokens."""

    dist: Literal["fixed"] = Field(description="Distribution name.")
    value: int = Field(ge=1, description="Number of tokens.")


class UniformLength(StrictModel):
    """Integer uniformly drawn from [min, max]."""

    dist: Literal["uniform"] = Field(description="Distribution name.")
    min: int = Field(ge=1, description="Smallest length, inclusive.")
    max: int = Field(ge=1, description="Largest length, inclusive.")

    @model_validator(mode="after")
    def _ordered(self) -> UniformLength:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must not exceed max ({self.max})")
        return self


class BoundedLength(StrictModel):
    """Shared bounds of the continuous distributions; draws are rounded and clipped."""

    min: int = Field(default=1, ge=1, description="Draws below are clipped up to this.")
    max: int = Field(default=1_000_000, ge=1, description="Draws above are clipped down to this.")

    @model_validator(mode="after")
    def _ordered(self) -> BoundedLength:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must not exceed max ({self.max})")
        return self


class NormalLength(BoundedLength):
    """Normal distribution with the given mean and standard deviation."""

    dist: Literal["normal"] = Field(description="Distribution name.")
    mean: float = Field(gt=0, description="Mean length in tokens.")
    std: float = Field(ge=0, description="Standard deviation in tokens.")


class LognormalLength(BoundedLength):
    """Lognormal distribution; ``mean`` is the arithmetic mean of the lengths (before
    clipping), ``sigma`` the standard deviation of their logarithm."""

    dist: Literal["lognormal"] = Field(description="Distribution name.")
    mean: float = Field(gt=0, description="Arithmetic mean length in tokens.")
    sigma: float = Field(ge=0, description="Standard deviation of ln(length).")


LengthDist = Annotated[
    FixedLength | UniformLength | NormalLength | LognormalLength,
    Field(discriminator="dist"),
]


class MixClass(StrictModel):
    """One class of requests in the workload mix."""

    weight: float = Field(default=1.0, gt=0, description="Relative share of requests.")
    prompt_tokens: LengthDist = Field(description="Prompt length distribution.")
    output_tokens: LengthDist = Field(description="Answer length distribution (max_tokens).")


class Workload(StrictModel):
    """What each request asks for."""

    mix: list[MixClass] = Field(min_length=1, description="Weighted classes of lengths.")


# --------------------------------------------------------------------------- load and SLO


class Load(StrictModel):
    """Closed-loop load: each concurrency level is one stage, run one after another."""

    concurrency: list[int] = Field(
        min_length=1, description="Virtual users per stage; each value is a stage."
    )
    requests_per_level: int | None = Field(
        default=None, ge=1, description="Requests per stage and provider (per region)."
    )
    duration_s: float | None = Field(
        default=None, gt=0, description="Stage length; no new request starts after it."
    )

    @field_validator("concurrency", mode="before")
    @classmethod
    def _scalar_to_list(cls, value: object) -> object:
        return [value] if isinstance(value, int) else value

    @field_validator("concurrency")
    @classmethod
    def _positive(cls, value: list[int]) -> list[int]:
        for level in value:
            if level < 1:
                raise ValueError(f"concurrency levels must be >= 1, got {level}")
        return value

    @model_validator(mode="after")
    def _has_length(self) -> Load:
        if self.requests_per_level is None and self.duration_s is None:
            raise ValueError("give requests_per_level, duration_s or both")
        return self


class SLO(StrictModel):
    """Per-request service-level objectives; a request meets the SLO if it meets each given."""

    ttft_ms: float | None = Field(default=None, gt=0, description="Max time to first token.")
    tpot_ms: float | None = Field(default=None, gt=0, description="Max time per output token.")
    e2e_ms: float | None = Field(default=None, gt=0, description="Max end-to-end latency.")


class Scenario(StrictModel):
    """A benchmark scenario: who to measure, with which requests, under which load, where."""

    name: Name = Field(description="Scenario name, shown in reports.")
    description: str | None = Field(default=None, description="Free text.")
    seed: int = Field(default=0, description="Seed of every random choice (lengths, prompts).")
    providers: list[Provider] = Field(min_length=1, description="Endpoints to benchmark.")
    workload: Workload = Field(description="Prompt and answer lengths.")
    load: Load = Field(description="Load shape and stage length.")
    regions: list[Name] = Field(
        default_factory=lambda: ["local"], min_length=1, description="Regions to run from."
    )
    slo: SLO = Field(default_factory=SLO, description="Objectives for goodput.")

    @field_validator("providers")
    @classmethod
    def _unique_providers(cls, value: list[Provider]) -> list[Provider]:
        _reject_duplicates([p.name for p in value], "provider name")
        return value

    @field_validator("regions")
    @classmethod
    def _unique_regions(cls, value: list[str]) -> list[str]:
        _reject_duplicates(value, "region")
        return value

    def provider(self, name: str) -> AnyProvider:
        """The provider called ``name``."""
        for candidate in self.providers:
            if candidate.name == name:
                return candidate
        raise KeyError(name)


def _reject_duplicates(values: list[str], what: str) -> None:
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"duplicate {what} {value!r}")
        seen.add(value)
