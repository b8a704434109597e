"""``workload.sessions``: multi-turn conversations (docs/workloads.md, "Multi-turn sessions").

A session is the unit the load shape schedules: a closed loop's virtual users each run
sessions back to back, an open loop's arrivals start sessions. A session's turns go to
one provider in one region, in order; each turn sends the conversation so far (every
earlier user message and the answer text the server returned) plus a new user message
planned from the seed, after the previous answer ended and a think time passed. The
conversation is capped (``max_context_tokens``): a turn that would not fit ends the
session instead of being sent.

Distributions of turns (counts) and think times (seconds) are their own small models:
both are bounded far below the token lengths of ``workload.mix`` (scenarios/limits.py).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from scenarios.base import StrictModel
from scenarios.limits import (
    MAX_LOGNORMAL_SIGMA,
    MAX_SESSION_TURNS,
    MAX_THINK_TIME_S,
    MAX_TOKENS,
)

__all__ = [
    "DEFAULT_MAX_CONTEXT_TOKENS",
    "ExponentialSeconds",
    "FixedSeconds",
    "FixedTurns",
    "GeometricTurns",
    "LognormalSeconds",
    "SessionsSpec",
    "ThinkTime",
    "Turns",
    "UniformSeconds",
    "UniformTurns",
]

# A common context window of served models; a larger cap is for models that have it.
DEFAULT_MAX_CONTEXT_TOKENS = 32_768


# --------------------------------------------------------------------------- turns


class FixedTurns(StrictModel):
    """Every session has the same number of turns."""

    dist: Literal["fixed"] = Field(description="Distribution name.")
    value: int = Field(ge=1, le=MAX_SESSION_TURNS, description="Turns per session.")


class UniformTurns(StrictModel):
    """Turns uniformly drawn from [min, max]."""

    dist: Literal["uniform"] = Field(description="Distribution name.")
    min: int = Field(ge=1, le=MAX_SESSION_TURNS, description="Fewest turns, inclusive.")
    max: int = Field(ge=1, le=MAX_SESSION_TURNS, description="Most turns, inclusive.")

    @model_validator(mode="after")
    def _ordered(self) -> UniformTurns:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must not exceed max ({self.max})")
        return self


class GeometricTurns(StrictModel):
    """Geometric turns (each turn is the last with the same probability, 1 / mean), as
    chat logs show: many short sessions, a long tail; clipped to ``max``."""

    dist: Literal["geometric"] = Field(description="Distribution name.")
    mean: float = Field(ge=1, le=MAX_SESSION_TURNS, description="Mean turns (before clipping).")
    max: int = Field(
        default=MAX_SESSION_TURNS, ge=1, le=MAX_SESSION_TURNS, description="Most turns."
    )


Turns = Annotated[FixedTurns | UniformTurns | GeometricTurns, Field(discriminator="dist")]


# --------------------------------------------------------------------------- think time


class FixedSeconds(StrictModel):
    """Always the same think time."""

    dist: Literal["fixed"] = Field(description="Distribution name.")
    value: float = Field(ge=0, le=MAX_THINK_TIME_S, description="Seconds.")


class UniformSeconds(StrictModel):
    """Think time uniformly drawn from [min, max] seconds."""

    dist: Literal["uniform"] = Field(description="Distribution name.")
    min: float = Field(ge=0, le=MAX_THINK_TIME_S, description="Shortest, seconds.")
    max: float = Field(ge=0, le=MAX_THINK_TIME_S, description="Longest, seconds.")

    @model_validator(mode="after")
    def _ordered(self) -> UniformSeconds:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must not exceed max ({self.max})")
        return self


class ExponentialSeconds(StrictModel):
    """Exponential think time with the given mean, clipped to ``max``."""

    dist: Literal["exponential"] = Field(description="Distribution name.")
    mean: float = Field(gt=0, le=MAX_THINK_TIME_S, description="Mean seconds.")
    max: float = Field(
        default=MAX_THINK_TIME_S, gt=0, le=MAX_THINK_TIME_S, description="Longest, seconds."
    )


class LognormalSeconds(StrictModel):
    """Lognormal think time: ``mean`` is the arithmetic mean (before clipping),
    ``sigma`` the standard deviation of its logarithm."""

    dist: Literal["lognormal"] = Field(description="Distribution name.")
    mean: float = Field(gt=0, le=MAX_THINK_TIME_S, description="Mean seconds.")
    sigma: float = Field(ge=0, le=MAX_LOGNORMAL_SIGMA, description="Standard deviation of ln.")
    max: float = Field(
        default=MAX_THINK_TIME_S, gt=0, le=MAX_THINK_TIME_S, description="Longest, seconds."
    )


ThinkTime = Annotated[
    FixedSeconds | UniformSeconds | ExponentialSeconds | LognormalSeconds,
    Field(discriminator="dist"),
]


# --------------------------------------------------------------------------- sessions


class SessionsSpec(StrictModel):
    """Multi-turn sessions: each turn's user message and answer length come from the
    workload's mix (drawn per turn from the seed); the conversation grows turn by turn."""

    turns: Turns = Field(
        description="Turns per session: a number, or {dist: fixed|uniform|geometric, ...}."
    )
    think_time: ThinkTime = Field(
        default_factory=lambda: FixedSeconds(dist="fixed", value=0.0),
        description=(
            "Seconds between the end of an answer and the next turn's send: a number, or "
            "{dist: fixed|uniform|exponential|lognormal, ...}."
        ),
    )
    max_context_tokens: int = Field(
        default=DEFAULT_MAX_CONTEXT_TOKENS,
        ge=2,
        le=MAX_TOKENS,
        description=(
            "Most tokens a turn may take (the conversation sent plus the answer's "
            "max_tokens); a turn that would need more ends its session (context_cap)."
        ),
    )

    @field_validator("turns", mode="before")
    @classmethod
    def _turns_number(cls, value: object) -> object:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return {"dist": "fixed", "value": value}
        return value

    @field_validator("think_time", mode="before")
    @classmethod
    def _seconds_number(cls, value: object) -> object:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return {"dist": "fixed", "value": value}
        return value

    def max_turns(self) -> int:
        """The most turns a session can have."""
        turns = self.turns
        if isinstance(turns, FixedTurns):
            return turns.value
        return turns.max
