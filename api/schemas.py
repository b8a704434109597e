"""Request and response models of the REST API (separate Create and Public models)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


def stage_label(concurrency: int, rate: float | None) -> str:
    """How a stage is named to users: its load level."""
    if rate is None:
        return f"concurrency {concurrency}"
    cap = f", ≤{concurrency} in flight" if concurrency else ""
    return f"rate {rate:g} rps{cap}"


class ScenarioPublic(BaseModel):
    """A stored scenario."""

    id: str
    name: str
    created_at: dt.datetime
    scenario: dict[str, Any] | None = None


class RunOverrides(BaseModel):
    """Changes applied to the scenario for this run only."""

    model_config = ConfigDict(extra="forbid")

    regions: list[str] | None = Field(default=None, description="Regions to run from.")
    concurrency: list[int] | None = Field(default=None, description="Closed-loop levels.")
    rps: list[float] | None = Field(default=None, description="Open-loop rates (stages).")
    requests_per_level: int | None = Field(default=None, description="Requests per stage.")
    duration_s: float | None = Field(default=None, description="Stage length.")


class RunCreate(BaseModel):
    """Start a run from a stored scenario or an inline one."""

    model_config = ConfigDict(extra="forbid")

    scenario_id: str | None = Field(default=None, description="Id from POST /v1/scenarios.")
    scenario: dict[str, Any] | None = Field(default=None, description="An inline scenario.")
    overrides: RunOverrides | None = Field(default=None, description="Per-run changes.")
    wait_for_workers: bool = Field(
        default=False,
        description="Wait for workers of regions that have none live, instead of 409.",
    )


class RunCreated(BaseModel):
    """Answer to POST /v1/runs."""

    id: str
    state: str
    shards: int
    stages: int


class ShardPublic(BaseModel):
    """Progress of one shard."""

    shard_id: str
    provider: str
    region: str
    state: str
    attempt: int | None
    requests_done: int
    requests_planned: int | None
    errors: int
    ttft_p50_ms: float | None
    message: str | None


class StagePublic(BaseModel):
    """Progress of one stage."""

    index: int
    concurrency: int = Field(description="Virtual users (closed loop) or in-flight cap (0: none).")
    rate: float | None = Field(default=None, description="Open loop: arrivals per second.")
    state: str
    shards: list[ShardPublic]

    @property
    def label(self) -> str:
        """``concurrency 8`` or ``rate 5 rps``."""
        return stage_label(self.concurrency, self.rate)


class RunPublic(BaseModel):
    """A run's state and progress."""

    id: str
    name: str
    state: str
    created_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    requests_done: int
    requests_planned: int | None
    errors: int
    ttft_p50_ms: float | None
    stages: list[StagePublic]
