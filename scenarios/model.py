"""The benchmark scenario: one pydantic model, the public contract of tokenbench.

Key names here are what users write in YAML/JSON; fields may be added, never renamed.
Every model forbids unknown keys so that a typo is an error naming its path, not a
silently ignored setting. Variants (provider kinds, length distributions) are chosen
by a discriminator field, never by ``if kind == ...`` chains in callers. Its parts have
modules of their own: providers (scenarios/providers/kinds.py), workload
(scenarios/workload/spec.py), load (scenarios/load/shape.py), objectives (scenarios/slo.py) and
failover upstreams (scenarios/providers/upstreams.py); the checks that span them are here.
"""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from scenarios.base import Name, Regions, StrictModel
from scenarios.limits import (
    MAX_PROVIDERS,
    MAX_RUN_COST_USD,
    MAX_TEXT_CHARS,
    MAX_TOTAL_REQUESTS,
    MAX_UPSTREAMS,
    Seed,
)
from scenarios.load.shape import Load
from scenarios.providers.kinds import AnyProvider, Provider
from scenarios.providers.upstreams import Upstream
from scenarios.slo import SLO
from scenarios.workload.images import IMAGE_KINDS
from scenarios.workload.spec import Workload

__all__ = ["SESSION_KINDS", "RunBudget", "Scenario"]


class RunBudget(StrictModel):
    """What one run may spend on token-priced providers (docs/teams.md, "Budgets and the
    spend ledger"): refused up front when its cost bound is above, stopped (cancelled,
    reason budget) when its recorded spend reaches it."""

    max_cost_usd: float = Field(
        gt=0,
        le=MAX_RUN_COST_USD,
        description="Most USD the run may spend on token-priced providers (pricing).",
    )


class Scenario(StrictModel):
    """A benchmark scenario: who to measure, with which requests, under which load, where."""

    name: Name = Field(description="Scenario name, shown in reports.")
    description: str | None = Field(
        default=None, max_length=MAX_TEXT_CHARS, description="Free text."
    )
    seed: Seed = Field(default=0, description="Seed of every random choice (lengths, prompts).")
    providers: list[Provider] = Field(
        min_length=1, max_length=MAX_PROVIDERS, description="Endpoints to benchmark."
    )
    workload: Workload = Field(description="Prompt and answer lengths.")
    load: Load = Field(description="Load shape and stage length.")
    regions: Regions = Field(default_factory=lambda: ["local"], description="Regions to run from.")
    slo: SLO = Field(default_factory=SLO, description="Objectives for goodput.")
    upstreams: list[Upstream] = Field(
        default_factory=list,
        max_length=MAX_UPSTREAMS,
        description=(
            "Simulated upstreams that a local `tokenbench run` starts on 127.0.0.1 at their "
            "ports, for a gateway under test to fall back between; their logs are joined "
            "to the records (docs/failover.md). Not over REST."
        ),
    )

    budget: RunBudget | None = Field(
        default=None,
        description=(
            "A cap on what the run may spend on token-priced providers: checked against "
            "its dry-run cost bound at submission and against its recorded spend while "
            "it goes (docs/teams.md)."
        ),
    )

    @field_validator("upstreams")
    @classmethod
    def _unique_upstreams(cls, value: list[Upstream]) -> list[Upstream]:
        _reject_duplicates([u.name for u in value], "upstream name")
        _reject_duplicates([str(u.port) for u in value], "upstream port")
        return value

    @model_validator(mode="after")
    def _images_sendable(self) -> Scenario:
        if self.workload.images is None:
            return self
        for provider in self.providers:
            if provider.kind not in IMAGE_KINDS:
                raise ValueError(
                    f"workload.images: provider {provider.name!r} (kind {provider.kind}) "
                    "cannot send images; only the chat dialects can ("
                    f"{', '.join(sorted(IMAGE_KINDS))}): drop workload.images or that provider"
                )
        return self

    @model_validator(mode="after")
    def _stages_defined(self) -> Scenario:
        # Here, not on Load: whether a stage has a length depends on the workload too.
        load = self.load
        sessions = self.workload.sessions
        if sessions is None and load.sessions_per_level is not None:
            raise ValueError("load: sessions_per_level counts workload.sessions: none are set")
        if self.workload.replay is not None:
            if load.concurrency or load.rate is not None or load.adaptive:
                raise ValueError(
                    "load: a replay sets its own arrivals: drop concurrency, rate, sweep "
                    "and find_capacity"
                )
            return self
        if load.adaptive:
            if sessions is not None:
                raise ValueError(
                    "load: a sweep or capacity search decides stages of independent "
                    "requests: drop workload.sessions"
                )
        elif not load.concurrency and load.rate is None:
            raise ValueError(
                "load: give concurrency (closed loop), rate (open loop), sweep or find_capacity"
            )
        if sessions is not None:
            self._check_session_providers()
            if load.requests_per_level is not None:
                raise ValueError(
                    "load: with workload.sessions a stage is counted in sessions: "
                    "give sessions_per_level instead of requests_per_level"
                )
            if load.sessions_per_level is None and load.duration_s is None:
                raise ValueError("load: give sessions_per_level, duration_s or both")
        elif load.requests_per_level is None and load.duration_s is None:
            raise ValueError("load: give requests_per_level, duration_s or both")
        planned = self.planned_requests()
        if planned is not None and planned > MAX_TOTAL_REQUESTS:
            raise ValueError(
                f"load: the run plans {planned:,.0f} requests (levels × providers × regions × "
                "requests_per_level, or rps × duration_s; a sweep or search: its most "
                "stages × requests_per_level × providers × regions), more than the "
                f"{MAX_TOTAL_REQUESTS:,} a run may send: lower requests_per_level or "
                "duration_s, or split the run"
            )
        return self

    def _check_session_providers(self) -> None:
        for provider in self.providers:
            if provider.kind not in SESSION_KINDS:
                raise ValueError(
                    f"workload.sessions: provider {provider.name!r} is kind {provider.kind!r}; "
                    f"a session sends a chat conversation, which kinds "
                    f"{', '.join(SESSION_KINDS)} carry"
                )

    def units_per_level(self) -> int | None:
        """What bounds a stage's count per provider and region: ``sessions_per_level``
        with workload.sessions, else ``requests_per_level``."""
        if self.workload.sessions is not None:
            return self.load.sessions_per_level
        return self.load.requests_per_level

    def planned_requests(self) -> float | None:
        """Requests the run plans at most over all stages, providers and regions: from
        ``requests_per_level``, or for an open loop ``rps × duration_s`` (None when only a
        closed loop's duration bounds it, or for a replay). With sessions, the sessions
        so bounded times the most turns a session can have."""
        load = self.load
        if self.workload.replay is not None:
            return None
        if load.adaptive:
            assert load.requests_per_level is not None  # required by Load
            stages = load.max_stages() * load.requests_per_level
            return float(stages * len(self.providers) * len(self.regions))
        units = self.units_per_level()
        per_stage: list[float] = []
        for level in load.levels():
            bounds: list[float] = []
            if units is not None:
                bounds.append(units)
            if load.rate is not None and load.duration_s is not None:
                bounds.append(level * load.duration_s)
            if not bounds:
                return None
            per_stage.append(min(bounds))
        turns = 1 if self.workload.sessions is None else self.workload.sessions.max_turns()
        return sum(per_stage) * turns * len(self.providers) * len(self.regions)

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

    def report_slo(self) -> SLO:
        """The objective the report judges goodput and attainment by: ``slo``, or the
        capacity search's when ``slo`` names no target (so both judge the same)."""
        slo = self.slo
        search = self.load.find_capacity
        if search is not None and (slo.ttft_ms, slo.tpot_ms, slo.e2e_ms) == (None, None, None):
            return search.slo
        return slo

    def provider(self, name: str) -> AnyProvider:
        """The provider called ``name``."""
        for candidate in self.providers:
            if candidate.name == name:
                return candidate
        raise KeyError(name)


# Provider kinds whose adapter sends a chat conversation and keeps the answer's text.
SESSION_KINDS = (
    "openai",
    "simulated",
    "azure-openai",
    "anthropic",
    "openai-responses",
    "gemini",
)


def _reject_duplicates(values: list[str], what: str) -> None:
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"duplicate {what} {value!r}")
        seen.add(value)
