"""What travels between the control plane and workers: shard specs, events, Redis keys.

A run is planned into stages (load levels, in order) and shards (provider × region ×
stage). A shard spec is the Celery task's only argument; workers answer on two Redis
Streams per run: lifecycle events and Arrow record batches.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from scenarios.model import Provider, Workload

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


def heartbeat_key(region: str, worker: str) -> str:
    """Expiring key a live worker refreshes."""
    return f"{KEY_PREFIX}:worker:{region}:{worker}"


def heartbeat_pattern(region: str) -> str:
    """Pattern matching the heartbeat keys of a region's workers."""
    return f"{KEY_PREFIX}:worker:{region}:*"


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
    concurrency: int = Field(ge=1)
    seq_start: int = Field(default=0, ge=0, description="First request sequence number.")
    requests: int | None = Field(default=None, ge=1, description="Requests to send.")
    duration_s: float | None = Field(default=None, gt=0, description="Stop starting after this.")


class EventType(StrEnum):
    """Lifecycle events a worker publishes for a shard attempt."""

    STARTED = "shard_started"
    PROGRESS = "shard_progress"
    FINISHED = "shard_finished"
    FAILED = "shard_failed"
