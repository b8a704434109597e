"""The benchmark scenario: one pydantic model, the public contract of tokenbench.

Key names here are what users write in YAML/JSON; fields may be added, never renamed.
Every model forbids unknown keys so that a typo is an error naming its path, not a
silently ignored setting. Variants (provider kinds, length distributions) are chosen
by a discriminator field, never by ``if kind == ...`` chains in callers.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from scenarios.adaptive import FindCapacity, Saturation, StopWhen, Sweep
from scenarios.base import Name, StrictModel
from scenarios.dataset_spec import DatasetWorkload
from scenarios.images import IMAGE_KINDS, ImagesSpec
from scenarios.limits import (
    MAX_BURSTINESS,
    MAX_CONCURRENCY,
    MAX_DURATION_S,
    MAX_LEVELS,
    MAX_LOGNORMAL_SIGMA,
    MAX_MIX_CLASSES,
    MAX_PROVIDERS,
    MAX_REGIONS,
    MAX_REQUESTS_PER_LEVEL,
    MAX_RPS,
    MAX_SEED,
    MAX_TEXT_CHARS,
    MAX_TOKENS,
    MAX_TOTAL_REQUESTS,
    MAX_UPSTREAMS,
    MAX_WEIGHT,
    MIN_BURSTINESS,
    MIN_SEED,
)
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
from scenarios.sessions import SessionsSpec
from scenarios.slo import SLO
from scenarios.tokenizer_ref import TokenizerRef
from scenarios.tools import ToolsSpec
from scenarios.upstreams import Upstream

__all__ = [
    "DATASET_ID_PATTERN",
    "SESSION_KINDS",
    "SLO",
    "AnyProvider",
    "Arrival",
    "DatasetSource",
    "DatasetWorkload",
    "Deployment",
    "FindCapacity",
    "FixedLength",
    "ImagesSpec",
    "LengthDist",
    "Load",
    "LognormalLength",
    "MixClass",
    "NormalLength",
    "OpenAIProvider",
    "Pricing",
    "PromptFile",
    "Provider",
    "ProviderBase",
    "RateLoad",
    "Replay",
    "Saturation",
    "Scenario",
    "SessionsSpec",
    "SimulateSpec",
    "SimulatedProvider",
    "StopWhen",
    "Sweep",
    "TokenizerRef",
    "ToolsSpec",
    "UniformLength",
    "Workload",
]


# --------------------------------------------------------------------------- lengths


class FixedLength(StrictModel):
    """Always the same number of tokens."""

    dist: Literal["fixed"] = Field(description="Distribution name.")
    value: int = Field(ge=1, le=MAX_TOKENS, description="Number of tokens.")


class UniformLength(StrictModel):
    """Integer uniformly drawn from [min, max]."""

    dist: Literal["uniform"] = Field(description="Distribution name.")
    min: int = Field(ge=1, le=MAX_TOKENS, description="Smallest length, inclusive.")
    max: int = Field(ge=1, le=MAX_TOKENS, description="Largest length, inclusive.")

    @model_validator(mode="after")
    def _ordered(self) -> UniformLength:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must not exceed max ({self.max})")
        return self


class BoundedLength(StrictModel):
    """Shared bounds of the continuous distributions; draws are rounded and clipped."""

    min: int = Field(
        default=1, ge=1, le=MAX_TOKENS, description="Draws below are clipped up to this."
    )
    max: int = Field(
        default=MAX_TOKENS, ge=1, le=MAX_TOKENS, description="Draws above are clipped down to this."
    )

    @model_validator(mode="after")
    def _ordered(self) -> BoundedLength:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must not exceed max ({self.max})")
        return self


class NormalLength(BoundedLength):
    """Normal distribution with the given mean and standard deviation."""

    dist: Literal["normal"] = Field(description="Distribution name.")
    mean: float = Field(gt=0, le=MAX_TOKENS, description="Mean length in tokens.")
    std: float = Field(ge=0, le=MAX_TOKENS, description="Standard deviation in tokens.")


class LognormalLength(BoundedLength):
    """Lognormal distribution; ``mean`` is the arithmetic mean of the lengths (before
    clipping), ``sigma`` the standard deviation of their logarithm."""

    dist: Literal["lognormal"] = Field(description="Distribution name.")
    mean: float = Field(gt=0, le=MAX_TOKENS, description="Arithmetic mean length in tokens.")
    sigma: float = Field(
        ge=0, le=MAX_LOGNORMAL_SIGMA, description="Standard deviation of ln(length)."
    )


LengthDist = Annotated[
    FixedLength | UniformLength | NormalLength | LognormalLength,
    Field(discriminator="dist"),
]


class MixClass(StrictModel):
    """One class of requests in the workload mix."""

    weight: float = Field(
        default=1.0, gt=0, le=MAX_WEIGHT, description="Relative share of requests."
    )
    prompt_tokens: LengthDist = Field(description="Prompt length distribution.")
    output_tokens: LengthDist = Field(description="Answer length distribution (max_tokens).")


DATASET_ID_PATTERN = r"^ds-[0-9a-f]{64}$"


class DatasetSource(StrictModel):
    """Where a workload's JSONL comes from: exactly one of a local ``path`` (read by
    ``tokenbench run`` and uploaded by ``tokenbench submit``, which replace it with the
    dataset's id) or an uploaded ``dataset`` (``POST /v1/datasets``). A control plane
    never reads a path a REST scenario names (docs/security.md)."""

    path: str | None = Field(
        default=None,
        min_length=1,
        description="Local JSONL file, relative to the directory tokenbench runs in.",
    )
    dataset: str | None = Field(
        default=None,
        pattern=DATASET_ID_PATTERN,
        description="Id of an uploaded dataset (POST /v1/datasets answers it).",
    )

    @model_validator(mode="after")
    def _one_source(self) -> DatasetSource:
        if (self.path is None) == (self.dataset is None):
            raise ValueError("give exactly one of path (a local file) and dataset (an id)")
        return self


class Replay(DatasetSource):
    """A captured traffic log re-sent with its original gaps (docs/load.md).

    One JSON object per line: ``timestamp`` (seconds, any origin), ``messages`` (chat
    messages) or ``prompt`` (text), ``max_tokens``; lines with a ``session_id`` (and
    optionally ``turn``) are the turns of one captured session, replayed in order to one
    provider, each after the previous answer (docs/workloads.md).
    """

    time_scale: float = Field(
        default=1.0, gt=0, description="Multiplies every gap: 0.5 replays twice as fast."
    )


class PromptFile(DatasetSource):
    """User-supplied chat prompts, one JSON object per line (``messages`` or ``prompt``,
    optional ``max_tokens``); request n uses line n (cycling). Answer lengths come from
    the line's ``max_tokens``, else from the mix; the mix's prompt lengths are unused."""


class Workload(StrictModel):
    """What each request asks for."""

    mix: list[MixClass] = Field(
        default_factory=list,
        max_length=MAX_MIX_CLASSES,
        description=(
            "Weighted classes of lengths (not with replay); with a dataset, the lengths "
            "sample: mix follows and the answer lengths of rows that have none."
        ),
    )
    prompts: PromptFile | None = Field(
        default=None, description="Chat prompts from a JSONL file instead of generated text."
    )
    shared_prefix_tokens: int = Field(
        default=0,
        ge=0,
        le=MAX_TOKENS,
        description=(
            "Tokens of text every prompt of the run starts with (prompt-cache tests); "
            "counted in the planned prompt length."
        ),
    )
    replay: Replay | None = Field(
        default=None, description="Re-send a captured traffic log instead of the mix."
    )
    dataset: DatasetWorkload | None = Field(
        default=None,
        description=(
            "Prompts and answer lengths from a dataset's rows: ShareGPT, OpenAI chat, "
            "CSV, Parquet, Arrow, Hugging Face hub (docs/workloads.md)."
        ),
    )
    tokenizer: TokenizerRef | None = Field(
        default=None,
        description=(
            "Tokenizer the prompts are made and counted with: generated prompts have "
            "exactly the planned number of tokens (docs/lengths.md). A string is a "
            "Hugging Face hub name; {path: ...} a local tokenizer.json or directory."
        ),
    )
    calibrate: bool = Field(
        default=True,
        description=(
            "Without a tokenizer: measure each provider's reported prompt_tokens during "
            "warm-up and rescale generated prompts to the planned length (docs/lengths.md)."
        ),
    )

    tools: ToolsSpec | None = Field(
        default=None,
        description=(
            "Function tools sent with a share of the requests (tools, tool_choice); a "
            "streamed tool call counts as output (docs/metrics.md)."
        ),
    )
    sessions: SessionsSpec | None = Field(
        default=None,
        description=(
            "Multi-turn sessions: each turn sends the conversation so far, answers "
            "included, to the same provider (docs/workloads.md)."
        ),
    )

    images: ImagesSpec | None = Field(
        default=None,
        description=(
            "Generated images sent with a share of the requests as image_url content "
            "parts (chat dialects only; docs/workloads.md)."
        ),
    )

    @model_validator(mode="after")
    def _has_requests(self) -> Workload:
        if self.replay is None and self.dataset is None and not self.mix:
            raise ValueError("give a length mix, a dataset or a replay log")
        if self.replay is not None and (
            self.mix or self.prompts is not None or self.dataset is not None
        ):
            raise ValueError(
                "replay carries its own prompts and lengths: drop mix, prompts and dataset"
            )
        if self.dataset is not None:
            if self.prompts is not None:
                raise ValueError("give prompts (a JSONL file, cycled) or dataset, not both")
            if self.dataset.sample == "mix" and not self.mix:
                raise ValueError("dataset.sample: mix follows workload.mix: give a mix")
        if self.sessions is not None:
            if self.replay is not None:
                raise ValueError(
                    "sessions: a replay keeps the sessions its log's session_id names: "
                    "drop sessions"
                )
            if self.prompts is not None or self.dataset is not None:
                raise ValueError(
                    "sessions: turns are generated from the mix: drop prompts and dataset"
                )
            if self.tools is not None:
                raise ValueError(
                    "sessions: a tool call's result would have to be made up to go on: drop tools"
                )
            if self.images is not None:
                raise ValueError(
                    "sessions: turns resend their conversation as text; images are sent "
                    "with independent requests only: drop images"
                )
        return self


# --------------------------------------------------------------------------- load and SLO


Arrival = Literal["constant", "poisson", "gamma"]


class RateLoad(StrictModel):
    """Open-loop load: arrivals on a schedule computed up front from the seed; each rate
    is one stage. The client never waits for the server before the next arrival."""

    rps: list[Annotated[float, Field(le=MAX_RPS)]] = Field(
        min_length=1,
        max_length=MAX_LEVELS,
        description="Arrivals per second per provider and region; each value is a stage.",
    )
    arrival: Arrival = Field(
        default="poisson",
        description=(
            "Gaps between arrivals: constant, poisson (exponential) or gamma (shape = burstiness)."
        ),
    )
    burstiness: float = Field(
        default=1.0,
        ge=MIN_BURSTINESS,
        le=MAX_BURSTINESS,
        description="Gamma shape: 1 is Poisson, below 1 burstier, above 1 more regular.",
    )
    max_in_flight: int | None = Field(
        default=None,
        ge=1,
        le=MAX_CONCURRENCY,
        description=(
            "Cap on requests in flight per provider and region; arrivals waiting for a "
            "slot keep their scheduled start, so the wait shows as schedule lag."
        ),
    )

    @field_validator("rps", mode="before")
    @classmethod
    def _scalar_to_list(cls, value: object) -> object:
        return [value] if isinstance(value, int | float) else value

    @field_validator("rps")
    @classmethod
    def _positive(cls, value: list[float]) -> list[float]:
        for rate in value:
            if rate <= 0:
                raise ValueError(f"rates must be > 0, got {rate}")
        return value


class Load(StrictModel):
    """Stages of load, run one after another: concurrency levels (closed loop), rates
    (open loop), stages decided while the run goes (a sweep, a capacity search:
    docs/answers.md), or one replay of ``workload.replay``."""

    concurrency: list[Annotated[int, Field(le=MAX_CONCURRENCY)]] = Field(
        default_factory=list,
        max_length=MAX_LEVELS,
        description="Closed loop: virtual users per stage; each value is a stage.",
    )
    rate: RateLoad | None = Field(default=None, description="Open loop: arrival rates.")
    sweep: Sweep | None = Field(
        default=None,
        description=(
            "Synchronous, throughput, then open-loop rates between them, decided while "
            "the run goes; the report marks the knee (docs/answers.md)."
        ),
    )
    find_capacity: FindCapacity | None = Field(
        default=None,
        description=(
            "Search the highest rate (or concurrency) at which the SLO attainment holds, "
            "with confidence (docs/answers.md)."
        ),
    )
    requests_per_level: int | None = Field(
        default=None,
        ge=1,
        le=MAX_REQUESTS_PER_LEVEL,
        description="Requests per stage and provider (per region).",
    )
    sessions_per_level: int | None = Field(
        default=None,
        ge=1,
        le=MAX_REQUESTS_PER_LEVEL,
        description="With workload.sessions: sessions per stage and provider (per region).",
    )
    duration_s: float | None = Field(
        default=None,
        gt=0,
        le=MAX_DURATION_S,
        description="Stage length, warm-up and cool-down included; no new request starts after it.",
    )
    warmup_s: float = Field(
        default=0.0,
        ge=0,
        le=MAX_DURATION_S,
        description="Start of each stage whose requests are recorded but not steady state.",
    )
    cooldown_s: float = Field(
        default=0.0,
        ge=0,
        le=MAX_DURATION_S,
        description="End of each stage whose requests are recorded but not steady state.",
    )
    stop_when: StopWhen | None = Field(
        default=None,
        description=(
            "Stop a stage once a percentile's confidence interval is tight enough "
            "(docs/answers.md)."
        ),
    )
    saturation: Saturation | None = Field(
        default=None,
        description=(
            "Over-saturation of open-loop stages: stop (the default for sweeps and "
            "capacity searches), mark, or off (the default for fixed levels)."
        ),
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
    def _one_shape(self) -> Load:
        shapes = [
            name
            for name, given in (
                ("concurrency", bool(self.concurrency)),
                ("rate", self.rate is not None),
                ("sweep", self.sweep is not None),
                ("find_capacity", self.find_capacity is not None),
            )
            if given
        ]
        if len(shapes) > 1:
            raise ValueError(
                "give one of concurrency (closed loop), rate (open loop), sweep or "
                f"find_capacity, not both {' and '.join(shapes)}"
            )
        if self.adaptive and self.requests_per_level is None:
            # The rates of decided stages are not known up front: a request count is what
            # bounds what each one may send (docs/security.md).
            raise ValueError(f"{shapes[0]} needs requests_per_level (each stage's bound)")
        if self.duration_s is not None and self.warmup_s + self.cooldown_s >= self.duration_s:
            raise ValueError("warmup_s + cooldown_s must be shorter than duration_s")
        search = self.find_capacity
        if search is not None and (self.requests_per_level or 0) < search.requests_to_pass():
            raise ValueError(
                f"find_capacity: attainment {search.attainment:g} can be shown with "
                f"{search.confidence:g} confidence only by stages of at least "
                f"{search.requests_to_pass()} requests (all meeting the SLO); "
                f"requests_per_level is {self.requests_per_level}"
            )
        return self

    @property
    def kind(self) -> Literal["closed", "open"]:
        """``open`` for rates (and replay), ``closed`` for concurrency levels."""
        return "closed" if self.concurrency else "open"

    @property
    def adaptive(self) -> bool:
        """True when stages are decided while the run goes (a sweep, a capacity search)."""
        return self.sweep is not None or self.find_capacity is not None

    @property
    def saturation_action(self) -> Literal["stop", "mark", "off"]:
        """What over-saturation of an open-loop stage does: as configured, else ``stop``
        for decided stages (they exist to find the limit) and ``off`` for fixed levels
        (the user asked for exactly those)."""
        if self.saturation is not None:
            return self.saturation.action
        return "stop" if self.adaptive else "off"

    def max_stages(self) -> int:
        """Stages the load runs at most (an adaptive load decides up to this many)."""
        if self.sweep is not None:
            return 2 + self.sweep.points
        if self.find_capacity is not None:
            return self.find_capacity.max_stages
        return len(self.levels())

    def levels(self) -> list[float]:
        """The stage values in order: concurrencies, or rates (rps); empty for replay and
        for decided stages (not known up front)."""
        if self.rate is not None:
            return list(self.rate.rps)
        return [float(level) for level in self.concurrency]


class Scenario(StrictModel):
    """A benchmark scenario: who to measure, with which requests, under which load, where."""

    name: Name = Field(description="Scenario name, shown in reports.")
    description: str | None = Field(
        default=None, max_length=MAX_TEXT_CHARS, description="Free text."
    )
    seed: int = Field(
        default=0,
        ge=MIN_SEED,
        le=MAX_SEED,
        description="Seed of every random choice (lengths, prompts).",
    )
    providers: list[Provider] = Field(
        min_length=1, max_length=MAX_PROVIDERS, description="Endpoints to benchmark."
    )
    workload: Workload = Field(description="Prompt and answer lengths.")
    load: Load = Field(description="Load shape and stage length.")
    regions: list[Name] = Field(
        default_factory=lambda: ["local"],
        min_length=1,
        max_length=MAX_REGIONS,
        description="Regions to run from.",
    )
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
SESSION_KINDS = ("openai", "simulated", "azure-openai")


def _reject_duplicates(values: list[str], what: str) -> None:
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"duplicate {what} {value!r}")
        seen.add(value)
