"""What each request of a scenario asks for: ``workload:``, its length distributions and
mix, prompt files, a replay log, and the dataset, tokenizer, tools, sessions and images
options (each of those has its own module; docs/workloads.md).

Variants (length distributions) are chosen by a discriminator field, never by
``if dist == ...`` chains in callers.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from scenarios.base import DATASET_ID_PATTERN, StrictModel
from scenarios.datasets.spec import DatasetWorkload
from scenarios.limits import (
    MAX_LOGNORMAL_SIGMA,
    MAX_MIX_CLASSES,
    MAX_TOKENS,
    MAX_WEIGHT,
)
from scenarios.tokenizers.ref import TokenizerRef
from scenarios.workload.images import ImagesSpec
from scenarios.workload.prefix_cache import PrefixCacheSpec
from scenarios.workload.sessions import SessionsSpec
from scenarios.workload.tools import ToolsSpec

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

    prefix_cache: PrefixCacheSpec | None = Field(
        default=None,
        description=(
            "Prompts built so that target_hit_rate of each one's tokens repeats a prefix "
            "the server has seen (a target prefix-cache hit rate; docs/workloads.md)."
        ),
    )

    @model_validator(mode="after")
    def _generated_for_the_cache(self) -> Workload:
        if self.prefix_cache is None:
            return self
        if self.replay is not None or self.prompts is not None or self.dataset is not None:
            raise ValueError(
                "prefix_cache: prompts are generated to hit the target: drop replay, "
                "prompts and dataset"
            )
        if self.shared_prefix_tokens:
            raise ValueError(
                "prefix_cache: its repeated prefix replaces shared_prefix_tokens: drop it"
            )
        return self

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
