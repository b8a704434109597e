"""The shadow-traffic gateway's configuration (``tokenbench gateway --config FILE``).

A gateway stands in front of one *primary* provider and mirrors a sampled share of the
live requests it forwards to *shadow* providers, from workers in ``regions``
(docs/shadow.md). Providers are written exactly as in a scenario (the same ``Provider``
models, presets included). The key names ``primary``, ``shadows``, ``sample_rate`` and
``regions`` are the public contract; fields may be added, never renamed.

A shadow session is stored as a run whose scenario is derived from this configuration
(:meth:`GatewayConfig.session_scenario`), so its records, providers and prices live in the
same tables as any other run's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator

from scenarios.base import EnvVar, Name, StrictModel
from scenarios.limits import (
    MAX_DURATION_S,
    MAX_GATEWAY_BACKLOG,
    MAX_GATEWAY_FALLBACKS,
    MAX_GATEWAY_PENDING,
    MAX_ID_CHARS,
    MAX_PROVIDERS,
    MAX_REGIONS,
)
from scenarios.loader import (
    Problem,
    ScenarioError,
    check_document,
    problems_from_validation,
    read_yaml,
)
from scenarios.model import Scenario
from scenarios.providers.kinds import AnyProvider, Provider

__all__ = [
    "PRIMARY_KINDS",
    "GatewayConfig",
    "Privacy",
    "load_gateway_config",
    "parse_gateway_config",
]

# The primary is forwarded byte for byte, so it must speak the dialect the gateway serves.
PRIMARY_KINDS = ("openai", "simulated")


class Privacy(StrictModel):
    """What the gateway keeps of each request it forwards."""

    store_text: bool = Field(
        default=False,
        description=(
            "Store the chat messages of every request (needed to replay captured traffic). "
            "Off: only their length and SHA-256 hash are stored."
        ),
    )
    hash_salt_env: EnvVar | None = Field(
        default=None,
        description=(
            "Variable holding a salt hashed with the messages (and with sample_by values), "
            "so that stored hashes cannot be matched against hashes of guessed prompts."
        ),
    )


class GatewayConfig(StrictModel):
    """Primary provider, shadow providers, and the policy that mirrors requests to them."""

    name: Name = Field(default="shadow", description="Session name, shown in reports.")
    primary: Provider = Field(
        description="The live provider; clients get its answers (kind openai or simulated)."
    )
    fallbacks: list[Provider] = Field(
        default_factory=list,
        max_length=MAX_GATEWAY_FALLBACKS,
        description=(
            "Providers (kind openai or simulated) a chat request is re-sent to, in order, "
            "when the one before failed it before any byte reached the client: "
            "unreachable, connection closed, silent past its stall timeout, 429 or 5xx "
            "(docs/failover.md). Each gets the body with its own model and its own key."
        ),
    )
    shadows: list[Provider] = Field(
        default_factory=list,
        max_length=MAX_PROVIDERS - 1,
        description="Providers that receive a copy of each sampled request, from every region.",
    )
    sample_rate: float = Field(
        default=0.05, ge=0, le=1, description="Share of requests mirrored to the shadows."
    )
    sample_by: str | None = Field(
        default=None,
        max_length=MAX_ID_CHARS,
        pattern=r"^(messages|body:[A-Za-z0-9_]+|header:[A-Za-z0-9-]+)$",
        description=(
            "Deterministic sampling by a hash of a request field: 'messages', 'body:FIELD' "
            "(e.g. body:user) or 'header:NAME'. Unset, or the field absent: a random draw."
        ),
    )
    regions: list[Name] = Field(
        min_length=1,
        max_length=MAX_REGIONS - 1,
        description="Regions whose workers send each sampled request.",
    )
    gateway_region: Name = Field(
        default="gateway", description="Region label of the primary's records (the gateway)."
    )
    privacy: Privacy = Field(default_factory=Privacy, description="What is stored per request.")
    max_pending: int = Field(
        default=1000,
        ge=1,
        le=MAX_GATEWAY_PENDING,
        description="Sampled requests waiting to be enqueued; more are dropped and counted.",
    )
    max_queue_backlog: int = Field(
        default=10_000,
        ge=1,
        le=MAX_GATEWAY_BACKLOG,
        description="Samples waiting in a region's queue above which new ones are dropped.",
    )
    shadow_ttl_s: float = Field(
        default=300.0,
        gt=0,
        le=MAX_DURATION_S,
        description="A shadow task not started this long after the request is discarded.",
    )
    inject_usage: bool = Field(
        default=True,
        description=(
            "Ask the primary for usage on streams (stream_options.include_usage) so its "
            "token counts are the server's; the usage event is removed again when the "
            "client did not ask for it."
        ),
    )

    @field_validator("primary")
    @classmethod
    def _forwardable(cls, value: AnyProvider) -> AnyProvider:
        if value.kind not in PRIMARY_KINDS:
            raise ValueError(
                f"the primary must be of kind {' or '.join(PRIMARY_KINDS)} "
                f"(the gateway forwards its wire format unchanged), got {value.kind!r}"
            )
        return value

    @field_validator("fallbacks")
    @classmethod
    def _forwardable_fallbacks(cls, value: list[AnyProvider]) -> list[AnyProvider]:
        for index, fallback in enumerate(value):
            if fallback.kind not in PRIMARY_KINDS:
                raise ValueError(
                    f"fallback {index} ({fallback.name!r}) must be of kind "
                    f"{' or '.join(PRIMARY_KINDS)} (the gateway forwards the wire format "
                    f"unchanged), got {fallback.kind!r}"
                )
        return value

    @field_validator("regions")
    @classmethod
    def _unique_regions(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("duplicate region")
        return value

    @model_validator(mode="after")
    def _unique_names(self) -> GatewayConfig:
        names = [
            self.primary.name,
            *(f.name for f in self.fallbacks),
            *(s.name for s in self.shadows),
        ]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate provider name(s): {', '.join(duplicates)}")
        if self.gateway_region in self.regions:
            raise ValueError(
                f"gateway_region {self.gateway_region!r} must differ from the shadow regions"
            )
        return self

    def session_scenario(self) -> Scenario:
        """The scenario a shadow session's run is stored with: its providers (for prices
        and the report) and regions; the workload and load are placeholders, a session
        has no planned requests."""
        return Scenario.model_validate(
            {
                "name": self.name,
                "description": "shadow-traffic session (docs/shadow.md)",
                "providers": [
                    p.model_dump(mode="json", exclude_none=True)
                    for p in (self.primary, *self.shadows)
                ],
                "workload": {
                    "mix": [
                        {
                            "prompt_tokens": {"dist": "fixed", "value": 1},
                            "output_tokens": {"dist": "fixed", "value": 1},
                        }
                    ]
                },
                "load": {"concurrency": [1], "requests_per_level": 1},
                "regions": [self.gateway_region, *self.regions],
            }
        )


def parse_gateway_config(
    data: Any, source: str | None = None, lines: dict[tuple[str, ...], int] | None = None
) -> GatewayConfig:
    """Validate decoded data (within the document caps of scenarios/limits.py); problems
    name the field path (and the YAML line, from ``lines``)."""
    if not isinstance(data, dict):
        raise ScenarioError([Problem("", "a gateway config must be a mapping")], source)
    check_document(data, source)
    try:
        return GatewayConfig.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(problems_from_validation(exc, lines or {}), source) from None


def load_gateway_config(path: str | Path) -> GatewayConfig:
    """Read and validate a gateway config file (YAML or JSON)."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError([Problem("", f"cannot read file: {exc.strerror}")], str(file)) from None
    data, lines = read_yaml(text, str(file))
    return parse_gateway_config(data, str(file), lines)
