"""What travels between the control plane and workers: shard specs, events, Redis keys.

A run is planned into stages (load levels, in order) and shards (provider × region ×
stage). A shard spec is the Celery task's only argument; workers answer on two Redis
Streams per run: lifecycle events and Arrow record batches.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from scenarios.model import Arrival, Provider, Workload

QUEUE_PREFIX = "tokenbench.region."
KEY_PREFIX = "tokenbench"


def region_queue(region: str) -> str:
    """Name of the Celery queue consumed by the workers of ``region``."""
    return f"{QUEUE_PREFIX}{region}"


def records_stream(run_id: str) -> str:
    """Redis Stream carrying the run's Arrow record batches."""
    return f"{KEY_PREFIX}:run:{run_id}:records"


def events_stream(run_id: str) -> str:
    """Redis Stream carrying the run's shard lifecycle events."""
    return f"{KEY_PREFIX}:run:{run_id}:events"


def cancel_key(run_id: str) -> str:
    """Key whose presence tells workers to stop the run's shards."""
    return f"{KEY_PREFIX}:run:{run_id}:cancelled"


def attempts_key(run_id: str, shard_id: str) -> str:
    """Counter of started attempts of a shard (incremented by each execution)."""
    return f"{KEY_PREFIX}:run:{run_id}:shard:{shard_id}:attempts"


def owner_key(run_id: str, shard_id: str) -> str:
    """Expiring key held by the worker executing a shard; a duplicate delivery that finds
    it held (or finds the shard done) does not run the shard again."""
    return f"{KEY_PREFIX}:run:{run_id}:shard:{shard_id}:owner"


def done_key(run_id: str, shard_id: str) -> str:
    """Set when an attempt of the shard finished; later deliveries are skipped."""
    return f"{KEY_PREFIX}:run:{run_id}:shard:{shard_id}:done"


# A dataset's bytes stay in Redis this long after the last dispatch that needed them.
DATASET_TTL_S = 24 * 3600


def dataset_key(dataset_id: str) -> str:
    """Key holding an uploaded dataset's bytes (set by the control plane before it
    dispatches a shard that uses the dataset; read by the worker)."""
    return f"{KEY_PREFIX}:dataset:{dataset_id}"


def shard_task_id(run_id: str, shard_id: str) -> str:
    """Celery task id of a shard: the same for every dispatch of it."""
    return f"{run_id}/{shard_id}"


def heartbeat_key(region: str, worker: str) -> str:
    """Expiring key a live worker refreshes."""
    return f"{KEY_PREFIX}:worker:{region}:{worker}"


def heartbeat_pattern(region: str) -> str:
    """Pattern matching the heartbeat keys of a region's workers."""
    return f"{KEY_PREFIX}:worker:{region}:*"


class ShardRate(BaseModel):
    """Open-loop part of a shard: the stage's schedule and which arrivals are this part's.

    Every part computes the stage's full seeded schedule and sends arrivals ``part``,
    ``part + parts``, ... of it, so the parts together send exactly the planned arrivals
    of one provider and region, whatever the number of parts.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    rps: float = Field(gt=0, description="Stage rate of one provider and region (all parts).")
    arrival: Arrival = "poisson"
    burstiness: float = Field(default=1.0, gt=0)
    part: int = Field(default=0, ge=0)
    parts: int = Field(default=1, ge=1)
    max_in_flight: int | None = Field(default=None, ge=1, description="This part's cap.")
    replay: bool = Field(default=False, description="Arrival times from workload.replay.")


class ShardSpec(BaseModel):
    """Everything a worker needs to execute one shard; JSON-serialisable."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str
    shard_id: str
    stage: int = Field(ge=0)
    region: str
    provider: Provider
    workload: Workload
    seed: int
    concurrency: int = Field(ge=0, description="Closed: virtual users; open: cap, 0 = none.")
    seq_start: int = Field(default=0, ge=0, description="First request sequence number.")
    requests: int | None = Field(default=None, ge=1, description="Requests to send.")
    duration_s: float | None = Field(default=None, gt=0, description="Stop starting after this.")
    rate: ShardRate | None = Field(default=None, description="Open loop; None: closed loop.")
    warmup_s: float = Field(default=0.0, ge=0, description="Not steady state: stage start.")
    cooldown_s: float = Field(default=0.0, ge=0, description="Not steady state: stage end.")


class EventType(StrEnum):
    """Lifecycle events a worker publishes for a shard attempt."""

    STARTED = "shard_started"
    PROGRESS = "shard_progress"
    FINISHED = "shard_finished"
    FAILED = "shard_failed"
