"""The wire contract: everything that travels between the control plane, the workers and
the gateway. Task names and payloads, Redis key and stream names, stream-entry encoding.

A run is planned into stages (load levels, in order) and shards (provider × region ×
stage). A shard message (the shard's own fields and the digests of its provider and
workload, stored once per run in Redis) is the Celery task's only argument; workers
answer on two Redis Streams per run: lifecycle events and Arrow record batches. A shadow
session (a run kind, docs/shadow.md) adds a third stream, the gateway's per-request
captures, and its records come from many processes under shared shard ids.

Every process encodes stream entries with the functions here and the control plane
decodes them here, so the format is written once. Tasks are sent by name: the control
plane and the gateway never import the worker runtime that defines them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field

from scenarios.load.shape import Arrival
from scenarios.providers.kinds import Provider
from scenarios.wire.records import batch_to_ipc, records_to_batch
from scenarios.workload.spec import Workload

QUEUE_PREFIX = "tokenbench.region."
KEY_PREFIX = "tokenbench"

# Celery task names (workers/tasks.py registers them).
RUN_SHARD = "tokenbench.run_shard"
RUN_SHADOW = "tokenbench.run_shadow"  # one sample (gateways before batches sent these)
RUN_SHADOW_BATCH = "tokenbench.run_shadow_batch"

# Streams are trimmed only well behind the consumers; a backlog this deep means the
# ingestor is down, and nothing must be lost before it catches up.
STREAM_MAXLEN = 1_000_000


def region_queue(region: str) -> str:
    """Name of the Celery queue consumed by the workers of ``region``."""
    return f"{QUEUE_PREFIX}{region}"


def records_stream(run_id: str) -> str:
    """Redis Stream carrying the run's Arrow record batches."""
    return f"{KEY_PREFIX}:run:{run_id}:records"


def events_stream(run_id: str) -> str:
    """Redis Stream carrying the run's shard lifecycle events."""
    return f"{KEY_PREFIX}:run:{run_id}:events"


def metrics_stream(run_id: str) -> str:
    """Redis Stream carrying the run's server-telemetry scrapes (Arrow batches,
    docs/telemetry.md)."""
    return f"{KEY_PREFIX}:run:{run_id}:metrics"


def cancel_key(run_id: str) -> str:
    """Key whose presence tells workers to stop the run's shards."""
    return f"{KEY_PREFIX}:run:{run_id}:cancelled"


def stop_key(run_id: str, shard_id: str) -> str:
    """Key whose presence tells the worker of a shard to stop sending: the control plane
    ended its stage early for its provider (over-saturated, or its interval tight
    enough; docs/answers.md). Unlike a cancel, the shard then finishes normally."""
    return f"{KEY_PREFIX}:run:{run_id}:shard:{shard_id}:stop"


def captures_stream(run_id: str) -> str:
    """Redis Stream carrying a shadow session's per-request capture rows (JSON)."""
    return f"{KEY_PREFIX}:run:{run_id}:captures"


class StreamKind(StrEnum):
    """The streams of a run, by the last part of their name."""

    RECORDS = "records"
    EVENTS = "events"
    CAPTURES = "captures"
    METRICS = "metrics"


def parse_stream(stream: str) -> tuple[str, StreamKind]:
    """Run id and kind of one of a run's streams (``tokenbench:run:ID:KIND``)."""
    run_id, _, kind = stream.removeprefix(f"{KEY_PREFIX}:run:").rpartition(":")
    return run_id, StreamKind(kind)


def attempts_key(run_id: str, shard_id: str) -> str:
    """Counter of started attempts of a shard (incremented by each execution)."""
    return f"{KEY_PREFIX}:run:{run_id}:shard:{shard_id}:attempts"


def owner_key(run_id: str, shard_id: str) -> str:
    """Expiring key held by the worker executing a shard; a duplicate delivery that finds
    it held (or finds the shard done) does not run the shard again."""
    return f"{KEY_PREFIX}:run:{run_id}:shard:{shard_id}:owner"


def token_key(run_id: str, shard_id: str) -> str:
    """Key holding the token of the execution that owns a shard."""
    return f"{KEY_PREFIX}:run:{run_id}:shard:{shard_id}:token"


def batch_seq_key(run_id: str, shard_id: str) -> str:
    """Counter handing out batch numbers of a session shard to every publisher."""
    return f"{KEY_PREFIX}:run:{run_id}:shard:{shard_id}:batch_seq"


def done_key(run_id: str, shard_id: str) -> str:
    """Set when an attempt of the shard finished; later deliveries are skipped."""
    return f"{KEY_PREFIX}:run:{run_id}:shard:{shard_id}:done"


# A dataset's bytes stay in Redis this long after the last dispatch that needed them.
DATASET_TTL_S = 24 * 3600


# A run's stored providers and workloads outlive its last dispatch or health check by
# this long (the control plane refreshes the TTL while the run is open, deletes the hash
# when it closes).
RUN_SPEC_TTL_S = 24 * 3600


def run_spec_key(run_id: str) -> str:
    """Hash holding a run's providers and workloads (JSON), each under the SHA-256 digest
    of its bytes: what :class:`ShardMessage` refers to."""
    return f"{KEY_PREFIX}:run:{run_id}:spec"


def calibration_key(run_id: str, provider: str, region: str) -> str:
    """Key holding a run's prompt-length calibration sums for one provider in one region
    (written by a shard when it finishes, read by the next stage's; docs/lengths.md)."""
    return f"{KEY_PREFIX}:run:{run_id}:calibration:{provider}:{region}"


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


class ShardFields(BaseModel):
    """A shard's own fields: everything but its provider and workload, which many shards
    of a run share (a :class:`ShardSpec` carries them, a :class:`ShardMessage` their
    digests)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str
    shard_id: str
    stage: int = Field(ge=0)
    region: str
    seed: int
    concurrency: int = Field(ge=0, description="Closed: virtual users; open: cap, 0 = none.")
    seq_start: int = Field(
        default=0, ge=0, description="First request (or session) sequence number."
    )
    requests: int | None = Field(
        default=None, ge=1, description="Requests (sessions, with workload.sessions) to send."
    )
    duration_s: float | None = Field(default=None, gt=0, description="Stop starting after this.")
    rate: ShardRate | None = Field(default=None, description="Open loop; None: closed loop.")
    scrape_metrics: bool = Field(
        default=False,
        description=(
            "Scrape the provider's metrics_url for the shard's life (one part of each "
            "provider, region and stage; every part of a simulated provider, whose "
            "endpoints are per worker process)."
        ),
    )
    reset_cache: bool = Field(
        default=False,
        description=(
            "Empty the provider's prefix cache (its cache_reset) before the stage's load: "
            "one part of each provider, region and stage; every part of a simulated "
            "provider (docs/providers.md, cache reset)."
        ),
    )
    warmup_s: float = Field(default=0.0, ge=0, description="Not steady state: stage start.")
    cooldown_s: float = Field(default=0.0, ge=0, description="Not steady state: stage end.")
    tag_requests: bool = Field(
        default=False,
        description=(
            "Send each request's id (x-tokenbench-request, the chat body's user) and record "
            "it with its prompt hash: the run's upstreams log them (docs/failover.md)."
        ),
    )


class ShardSpec(ShardFields):
    """Everything a worker needs to execute one shard; JSON-serialisable."""

    provider: Provider
    workload: Workload


class ShardMessage(ShardFields):
    """The argument of a ``RUN_SHARD`` task: a shard's own fields and the SHA-256 digests
    of its provider and workload, stored once per run in the hash at
    :func:`run_spec_key` (docs/decisions.md, 72; docs/concepts.md, "shard"). A provider's
    ``extra_body`` and tools may be megabytes; 300 shards sharing them would otherwise
    queue 300 copies in Redis. The worker resolves a message into its :class:`ShardSpec`
    (``workers/shard/run_spec.py``)."""

    provider_digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    workload_digest: str = Field(pattern=r"^[0-9a-f]{64}$")


class RunState(StrEnum):
    """A run's state, as stored in ``runs.state`` and shown by every view of a run."""

    QUEUED = "queued"  # waiting for its endpoints or its team's quota (docs/teams.md)
    RUNNING = "running"
    FINISHED = "finished"  # every shard finished, every announced batch ingested
    FAILED = "failed"
    CANCELLED = "cancelled"


class ShardState(StrEnum):
    """A shard's state, as stored in ``shards.state``; a stage's state is the same set."""

    PLANNED = "planned"  # stored, not yet sent to its region's queue
    DISPATCHED = "dispatched"  # on the queue, no worker has started it
    RUNNING = "running"  # a worker's attempt is sending requests
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"


SETTLED: frozenset[ShardState] = frozenset(
    {ShardState.FINISHED, ShardState.FAILED, ShardState.CANCELLED}
)
"""Shard states that never change again."""

IN_FLIGHT: frozenset[ShardState] = frozenset({ShardState.DISPATCHED, ShardState.RUNNING})
"""Shard states in which a worker has, or is about to have, the shard."""


class EventType(StrEnum):
    """Lifecycle events a worker publishes for a shard attempt."""

    STARTED = "shard_started"
    PROGRESS = "shard_progress"
    FINISHED = "shard_finished"
    FAILED = "shard_failed"
    # The outcome of the provider's cache reset before the stage (docs/providers.md).
    CACHE_RESET = "shard_cache_reset"


# ---------------------------------------------------------------- stream entries

# A key or value of a stream entry, typed as Redis's client types them
# (``redis.typing.EncodableT``), so an entry is passed to ``xadd`` as it is.
EntryValue = bytes | bytearray | memoryview | str | int | float
StreamEntry = dict[EntryValue, EntryValue]


@dataclass(frozen=True, slots=True)
class RecordBatch:
    """One entry of a run's records stream: an Arrow IPC batch of request records.

    (shard, attempt, batch_seq) is the key the ingestor de-duplicates on."""

    shard_id: str
    attempt: int
    batch_seq: int
    rows: int
    ipc: bytes

    @classmethod
    def of_rows(
        cls, shard_id: str, attempt: int, batch_seq: int, rows: list[dict[str, object]]
    ) -> RecordBatch:
        """The batch of ``rows`` (request records, ``scenarios/wire/records.py``)."""
        return cls(shard_id, attempt, batch_seq, len(rows), batch_to_ipc(records_to_batch(rows)))

    def fields(self) -> StreamEntry:
        """The stream entry."""
        return {
            "shard_id": self.shard_id,
            "attempt": self.attempt,
            "batch_seq": self.batch_seq,
            "rows": self.rows,
            "ipc": self.ipc,
        }

    @classmethod
    def decode(cls, fields: Mapping[bytes, bytes]) -> RecordBatch:
        """The batch of an entry read from Redis."""
        return cls(
            shard_id=fields[b"shard_id"].decode(),
            attempt=int(fields[b"attempt"]),
            batch_seq=int(fields[b"batch_seq"]),
            rows=int(fields[b"rows"]),
            ipc=fields[b"ipc"],
        )


@dataclass(frozen=True, slots=True)
class MetricsBatch:
    """One entry of a run's metrics stream: an Arrow IPC batch of scrape rows
    (``scenarios/wire/server_metrics.py``); each row is stored once by its
    (shard, attempt, scrape_seq)."""

    shard_id: str
    attempt: int
    scrapes: int
    ipc: bytes

    def fields(self) -> StreamEntry:
        """The stream entry."""
        return {
            "shard_id": self.shard_id,
            "attempt": self.attempt,
            "scrapes": self.scrapes,
            "ipc": self.ipc,
        }

    @classmethod
    def decode(cls, fields: Mapping[bytes, bytes]) -> MetricsBatch:
        """The batch of an entry read from Redis."""
        return cls(
            shard_id=fields[b"shard_id"].decode(),
            attempt=int(fields[b"attempt"]),
            scrapes=int(fields[b"scrapes"]),
            ipc=fields[b"ipc"],
        )


def event_fields(
    kind: EventType,
    shard_id: str,
    attempt: int,
    at: float,
    extra: Mapping[str, str | int | float],
) -> StreamEntry:
    """An entry of a run's events stream: the event, its shard attempt, when (epoch
    seconds) and the event's own fields (``shard_finished``'s are in docs/load.md)."""
    entry: StreamEntry = {"type": kind.value, "shard_id": shard_id, "attempt": attempt, "at": at}
    for key, value in extra.items():
        entry[key] = value
    return entry


def decode_event(fields: Mapping[bytes, bytes]) -> dict[str, str]:
    """An event entry read from Redis, as strings (as every stream value travels)."""
    return {key.decode(): value.decode() for key, value in fields.items()}


def capture_fields(rows: list[dict[str, object]]) -> StreamEntry:
    """An entry of a session's captures stream: capture rows (one per request), JSON."""
    return {"rows": orjson.dumps(rows)}


def decode_captures(fields: Mapping[bytes, bytes]) -> list[dict[str, Any]]:
    """The capture rows of an entry read from Redis."""
    rows: list[dict[str, Any]] = orjson.loads(fields[b"rows"])
    return rows


# ---------------------------------------------------------------- shadow sessions

PRIMARY_SHARD = "primary"
# Every record of a session has this attempt: its publishers never retry a shard.
SESSION_ATTEMPT = 1
# Sampling parameters a shadow receives as the client sent them; everything else (tools,
# logit bias, n > 1...) is left out: a shadow measures serving, not feature parity.
FORWARDED_PARAMS = (
    "temperature",
    "top_p",
    "stop",
    "seed",
    "presence_penalty",
    "frequency_penalty",
)
# Answer bound for dialects that need one when the client gave none (docs/shadow.md).
DEFAULT_MAX_TOKENS = 512


def shadow_shard_id(provider: str, region: str) -> str:
    """Shard id of a shadow provider's records from one region."""
    return f"shadow.{provider}.{region}"


class ShadowTask(BaseModel):
    """One sampled live request, as the gateway enqueues it for a region (``RUN_SHADOW``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str = Field(description="The shadow session (a run) the records belong to.")
    request_key: str = Field(min_length=1, description="Pairs the records with the primary's.")
    seq: int = Field(ge=0, description="The gateway's request number (also on the primary).")
    messages: list[dict[str, Any]] = Field(min_length=1, description="Chat messages as sent.")
    max_tokens: int | None = Field(default=None, ge=1, description="The client's answer bound.")
    params: dict[str, Any] = Field(default_factory=dict, description="FORWARDED_PARAMS given.")
    prompt_tokens: int = Field(ge=0, description="Estimated prompt length (planned column).")
    providers: list[Provider] = Field(min_length=1, description="The shadow providers.")


# Samples per shadow batch, at most: a message the broker and a worker hold whole, and
# requests a worker thread starts together (workers/gateway/sender.py batches them).
MAX_SHADOW_BATCH = 64
# Arrivals one batch spans, at most: a worker replays its samples' gaps, so a batch
# holds a worker thread for its span plus its slowest answer.
MAX_SHADOW_BATCH_SPAN_MS = 1000.0


class ShadowSample(BaseModel):
    """One sampled live request inside a :class:`ShadowBatch`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    request_key: str = Field(min_length=1, description="Pairs the records with the primary's.")
    seq: int = Field(ge=0, description="The gateway's request number (also on the primary).")
    messages: list[dict[str, Any]] = Field(min_length=1, description="Chat messages as sent.")
    max_tokens: int | None = Field(default=None, ge=1, description="The client's answer bound.")
    params: dict[str, Any] = Field(default_factory=dict, description="FORWARDED_PARAMS given.")
    prompt_tokens: int = Field(ge=0, description="Estimated prompt length (planned column).")
    offset_ms: float = Field(
        default=0.0,
        ge=0,
        le=MAX_SHADOW_BATCH_SPAN_MS,
        description="When the gateway received it, after the batch's first sample: the "
        "worker sends it as much later, so shadows see the live arrival gaps.",
    )


class ShadowBatch(BaseModel):
    """Sampled live requests of one session sent to a region as one task
    (``RUN_SHADOW_BATCH``): the session and its shadow providers once, then the samples
    in the order the gateway received them, each with its arrival offset."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str = Field(description="The shadow session (a run) the records belong to.")
    providers: list[Provider] = Field(min_length=1, description="The shadow providers.")
    samples: list[ShadowSample] = Field(
        min_length=1, max_length=MAX_SHADOW_BATCH, description="The sampled requests."
    )

    @classmethod
    def of_task(cls, task: ShadowTask) -> ShadowBatch:
        """A single-sample task as a batch of one."""
        fields = task.model_dump(exclude={"run_id", "providers"})  # offset 0: the first
        return cls(run_id=task.run_id, providers=task.providers, samples=[ShadowSample(**fields)])

    def tasks(self) -> list[ShadowTask]:
        """Each sample with the batch's session and providers (in the samples' order)."""
        return [
            ShadowTask.model_construct(
                run_id=self.run_id,
                providers=self.providers,
                **sample.model_dump(exclude={"offset_ms"}),
            )
            for sample in self.samples
        ]


# Options of every Redis client of tokenbench (workers, control plane, CLI): fail a dead
# connection within seconds instead of hanging on it (the socket timeout stays well
# above the control loop's 200 ms blocking reads), and check an idle pooled connection
# before reusing it, so a Redis restart costs one failed call, not a wedged process.
REDIS_CLIENT_OPTIONS: dict[str, Any] = {
    "socket_connect_timeout": 5,
    "socket_timeout": 30,
    "socket_keepalive": True,
    "health_check_interval": 10,
}
