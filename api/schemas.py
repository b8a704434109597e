"""Request and response models of the REST API (separate Create and Public models)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainValidator

from analytics.trends.regression import DEFAULT_MIN_CHANGE, DEFAULT_WINDOW
from scenarios.base import Name
from scenarios.gateway_config import GatewayConfig
from scenarios.limits import (
    MAX_CRON_CHARS,
    MAX_ID_CHARS,
    MAX_URL_CHARS,
    MinChange,
    TrendWindow,
)
from scenarios.model import Scenario
from scenarios.overrides import Overrides
from scenarios.stages import stage_label
from scenarios.wire.contract import RunState, ShardState


def _mapping(value: Any) -> dict[str, Any]:
    """Keep a JSON object as it is: the handler validates it itself (its problems are
    answered with their field paths, like a YAML body's), so only the shape is checked."""
    if not isinstance(value, dict):
        raise ValueError("must be a JSON object")
    return value


# A scenario in a JSON body: documented (OpenAPI) as the scenario JSON Schema, so clients
# and fuzzers can generate scenarios, but validated by the handler (api/rest/validation.py).
ScenarioBody = Annotated[dict[str, Any], PlainValidator(_mapping, json_schema_input_type=Scenario)]
# The same for a shadow gateway's configuration (docs/shadow.md).
GatewayConfigBody = Annotated[
    dict[str, Any], PlainValidator(_mapping, json_schema_input_type=GatewayConfig)
]


# How a decided stage's role reads in a progress label (docs/answers.md).
ROLE_LABELS = {
    "synchronous": "synchronous",
    "throughput": "throughput",
    "sweep": "sweep",
    "probe": "capacity probe",
}


class ScenarioPublic(BaseModel):
    """A stored scenario."""

    id: str
    name: str
    created_at: dt.datetime
    scenario: dict[str, Any] | None = None


class RunOverrides(Overrides):
    """Changes applied to the scenario for this run only (the command line's load flags
    are the same overrides: scenarios/overrides.py)."""


class RunCreate(BaseModel):
    """Start a run from a stored scenario or an inline one."""

    model_config = ConfigDict(extra="forbid")

    scenario_id: str | None = Field(default=None, description="Id from POST /v1/scenarios.")
    scenario: ScenarioBody | None = Field(default=None, description="An inline scenario.")
    overrides: RunOverrides | None = Field(default=None, description="Per-run changes.")
    wait_for_workers: bool = Field(
        default=False,
        description="Wait for workers of regions that have none live, instead of 409.",
    )
    visibility: Literal["org", "team"] | None = Field(
        default=None,
        description="Who reads this run's results: org (every token) or team (the "
        "submitting team and admins); null: the team's setting (docs/teams.md).",
    )


class QueuePublic(BaseModel):
    """Why a queued run waits (docs/teams.md, endpoint leases)."""

    position: int = Field(
        description="1: the next to start among the runs queued for the same targets "
        "(or, waiting for its team's quota, its team's)."
    )
    waiting_for: list[str] = Field(description="The runs it waits for.")
    reason: str = Field(description="Its target is in use, or its team is at its quota.")
    targets: list[str] = Field(
        description="The endpoints (URL, model, key variable) it measures: leased, or "
        "shared for its providers with shared: true."
    )


class RunCreated(BaseModel):
    """Answer to POST /v1/runs."""

    id: str
    state: RunState
    shards: int
    stages: int
    queue: QueuePublic | None = Field(
        default=None, description="Set when the run is queued: why it waits."
    )


class ShardPublic(BaseModel):
    """Progress of one shard."""

    shard_id: str
    provider: str
    region: str
    state: ShardState
    concurrency: int = Field(
        description="This shard's share of its stage's level (a part of a split level)."
    )
    attempt: int | None
    requests_done: int
    requests_planned: int | None
    errors: int
    ttft_p50_ms: float | None = Field(
        description="Median TTFT (ms) of the shard's successful requests so far: while it "
        "runs, from its worker (within 0.5 %); once the run ended, exact from the records."
    )
    message: str | None
    rate: float | None = Field(
        default=None,
        description="Open loop: the stage's arrivals per second for this shard's provider "
        "and region (a decided stage gives each provider its own).",
    )


class StageEndPublic(BaseModel):
    """A provider's stage ended early, or marked (docs/answers.md)."""

    provider: str
    outcome: str = Field(description="saturated | stopped_early")
    acted: bool = Field(description="Its shards were told to stop (false: marked only).")
    reason: str


class StagePublic(BaseModel):
    """Progress of one stage."""

    index: int
    concurrency: int = Field(
        description="The stage's level: virtual users (closed loop) or in-flight cap "
        "(0: none), of each provider and region, whatever parts it is split into."
    )
    rate: float | None = Field(default=None, description="Open loop: arrivals per second.")
    state: ShardState = Field(description="Finished when every shard is; failed if one is.")
    shards: list[ShardPublic]
    role: str | None = Field(
        default=None,
        description="A decided stage's role: synchronous, throughput, sweep or probe "
        "(docs/answers.md); None in a fixed plan.",
    )
    ended: list[StageEndPublic] = Field(
        default_factory=list, description="Providers whose shards this stage stopped early."
    )

    @property
    def label(self) -> str:
        """``concurrency 8`` or ``rate 5 rps``; a decided stage says its role, and its
        rates when providers have their own."""
        rates = sorted({s.rate for s in self.shards if s.rate is not None})
        if len(rates) > 1:
            level = f"rates {rates[0]:g}–{rates[-1]:g} rps"
        else:
            level = stage_label(self.concurrency, self.rate)
        if self.role is None:
            return level
        return f"{ROLE_LABELS.get(self.role, self.role)} · {level}"


class RunPublic(BaseModel):
    """A run's state and progress."""

    id: str
    name: str
    state: RunState
    created_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    requests_done: int
    requests_planned: int | None
    errors: int
    ttft_p50_ms: float | None = Field(
        description="Median of the shards' TTFT p50 (a rough overall figure; the report "
        "has each provider's and region's)."
    )
    stages: list[StagePublic]
    deciding: bool = Field(
        default=False,
        description="More stages may still be decided (a sweep or capacity search under "
        "way): requests_planned covers the stages decided so far.",
    )
    reason: str | None = Field(
        default=None,
        description="Why the control plane ended the run early: budget (its recorded spend "
        "reached its budget.max_cost_usd or its team's monthly budget; docs/teams.md).",
    )
    reason_detail: str | None = Field(
        default=None, description="The figures and the setting that ended it early."
    )
    queue: QueuePublic | None = Field(
        default=None, description="Set while the run is queued: its position and why it waits."
    )
    kind: Literal["measured", "imported"] = Field(
        default="measured",
        description="imported: another tool's result, imported (docs/import.md); its "
        "report names the tool, its definitions and its own figures.",
    )
    tool: str | None = Field(default=None, description="An imported run's tool.")


# --------------------------------------------------------------------------- schedules


class ScheduleCreate(BaseModel):
    """Run a stored scenario on a cron expression (docs/tracking.md)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    scenario_id: str = Field(max_length=MAX_ID_CHARS, description="Id from POST /v1/scenarios.")
    cron: str = Field(
        max_length=MAX_CRON_CHARS,
        description="Crontab expression: minute hour day-of-month month day-of-week "
        "(0 and 7 are Sunday), or six fields with seconds first; at most one fire a "
        "minute by default.",
    )
    timezone: str = Field(
        default="UTC", max_length=MAX_ID_CHARS, description="IANA time zone of the expression."
    )
    name: Name | None = Field(default=None, max_length=MAX_ID_CHARS, description="A label.")
    overrides: RunOverrides | None = Field(
        default=None, description="Per-run changes, as POST /v1/runs takes them."
    )
    wait_for_workers: bool = Field(
        default=False,
        description="A fire while a region has no live worker waits for one (else it fails).",
    )
    webhook_url: str | None = Field(
        default=None,
        max_length=MAX_URL_CHARS,
        description="POSTed a small JSON when a run of this schedule regresses (egress policy).",
    )
    trend_window: TrendWindow = Field(
        default=DEFAULT_WINDOW,
        description="Earlier runs the latest run is compared with.",
    )
    min_change: MinChange = Field(
        default=DEFAULT_MIN_CHANGE,
        description="Smallest relative change that counts as a regression (0.1: 10 %).",
    )


class FirePublic(BaseModel):
    """One fire of a schedule: the run it started, or why it did not."""

    seq: int
    scheduled_for: dt.datetime
    fired_at: dt.datetime
    kind: str = Field(
        description="scheduled, or catch_up: missed while the control plane was down."
    )
    outcome: str = Field(description="started, skipped (the previous run still ran) or failed.")
    run_id: str | None = None
    run_state: str | None = None
    message: str | None = None
    evaluated_at: dt.datetime | None = Field(
        default=None, description="When the ended run's trend was judged."
    )
    regressions: list[dict[str, Any]] | None = Field(
        default=None, description="What the trend flagged in this run (empty: nothing)."
    )


class WebhookDeliveryPublic(BaseModel):
    """A regression notification sent to the schedule's webhook."""

    run_id: str
    sent_at: dt.datetime
    attempts: int
    status: int | None
    outcome: str = Field(description="delivered, failed, or refused by the egress policy.")
    message: str | None


class SchedulePublic(BaseModel):
    """A schedule, its next fire, its last fire and its last webhook notification."""

    id: str
    name: str | None
    scenario_id: str
    cron: str
    timezone: str
    overrides: dict[str, Any] | None
    wait_for_workers: bool
    webhook_url: str | None = Field(
        description=(
            "Where the webhook goes, scheme://host[:port]/ only: its user, password, path "
            "and query (where webhooks carry credentials) show as [redacted]."
        )
    )
    trend_window: int
    min_change: float
    state: str = Field(description="active or paused.")
    created_at: dt.datetime
    next_fire_at: dt.datetime | None = Field(description="None while paused.")
    last_fire: FirePublic | None = None
    last_webhook: WebhookDeliveryPublic | None = None
