"""Process settings, from ``TOKENBENCH__...`` environment variables (one pydantic-settings model).

Nested groups use ``__`` as delimiter: ``TOKENBENCH__REDIS__URL`` sets ``redis.url``.
Settings are built on demand by :func:`get_settings`, never at import time, so tests and
subprocesses can set the environment first.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from scenarios.limits import (
    DEFAULT_SQL_MAX_BYTES,
    MAX_WEBHOOK_ATTEMPTS,
    MAX_WEBHOOK_TIMEOUT_S,
    MIN_SCHEDULE_INTERVAL_S,
)
from scenarios.security.host_rules import parse_rule


class RedisSettings(BaseModel):
    """Where the broker and the event/record streams live."""

    url: str | None = Field(
        default=None,
        description="redis:// URL; unset means `tokenbench run` starts an embedded server.",
    )


class DuckDBSettings(BaseModel):
    """The analytics database."""

    path: Path = Field(default=Path("tokenbench.duckdb"), description="DuckDB file.")
    memory_limit: str | None = Field(
        default=None,
        pattern=r"^\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)$",
        description=(
            "DuckDB memory limit of the control plane's writer (e.g. 2GB); unset: DuckDB's "
            "default, 80 % of the machine's memory. Larger sorts spill to disk."
        ),
    )


class PublishSettings(BaseModel):
    """How workers batch request records into Arrow record batches."""

    # Larger batches cut the control plane's per-entry and per-transaction ingest cost
    # (benchmarks/analytics_10m.py: 256-row batches ~0.3M rows/s, 1024-row ~0.77M); the
    # interval below still bounds how late a quiet shard's records arrive.
    batch_rows: int = Field(default=1024, ge=1, description="Flush after this many records.")
    batch_interval_s: float = Field(default=1.0, gt=0, description="...or after this long.")
    progress_interval_s: float = Field(default=1.0, gt=0, description="Progress event period.")


class WorkerSettings(BaseModel):
    """Settings of a worker process."""

    region: str = Field(default="local", description="Region whose queue this worker consumes.")
    heartbeat_s: float = Field(default=2.0, gt=0, description="Heartbeat period.")
    processes: int | None = Field(
        default=None,
        ge=1,
        description=(
            "Worker processes of `tokenbench worker` (unset: one per core) and of each "
            "region `tokenbench run` starts (unset: one)."
        ),
    )
    secret_hosts: dict[str, list[str]] = Field(
        default_factory=dict,
        description=(
            "JSON object binding a key variable to the places its value may be sent, each "
            "[scheme://]host[:port] (https and port 443 unless written; * is one DNS label, "
            'a port of * any port), e.g. {"MY_VLLM_KEY": ["http://vllm.internal.example:8000"]}; '
            "presets bind their own (docs/security.md). Unbound variables and TOKENBENCH* "
            "variables are refused."
        ),
    )

    @field_validator("secret_hosts")
    @classmethod
    def _secret_rules(cls, bindings: dict[str, list[str]]) -> dict[str, list[str]]:
        # A rule that does not parse stops the worker at start, naming it (not a key
        # silently sent nowhere, or somewhere unexpected).
        for rules in bindings.values():
            for rule in rules:
                parse_rule(rule)
        return bindings

    prewarm: bool = Field(
        default=True,
        description=(
            "Open a shard's connections before its stage clock starts (paced, recorded in "
            "its client health as prewarmed_connections and prewarm_ms)."
        ),
    )
    simulator_idle_s: float = Field(
        default=60.0,
        gt=0,
        description=(
            "A simulated endpoint (a ~95 MB process) that no running shard has used for "
            "this long is stopped; it starts again on its next use."
        ),
    )
    max_simulators: int = Field(
        default=8,
        ge=1,
        le=256,
        description=(
            "Simulated endpoints one worker process runs at once; a shard that needs one "
            "more while all are in use fails, naming this setting."
        ),
    )
    gc_tuning: bool = Field(
        default=True,
        description=(
            "After start-up collect, gc.freeze() and raise the GC thresholds; GC pauses are "
            "recorded per shard either way (workers/runtime/gc_tuning.py)."
        ),
    )


class ApiSettings(BaseModel):
    """The REST control plane."""

    tokens: list[SecretStr] = Field(
        default_factory=list,
        description="Bearer tokens accepted (JSON list). Empty: every request is refused.",
    )
    max_body_bytes: int = Field(default=1_048_576, ge=1024, description="Largest request body.")
    max_dataset_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1024,
        le=1024 * 1024 * 1024,
        description=(
            "Largest uploaded dataset (POST /v1/datasets), and largest dataset a worker "
            "fetches or `tokenbench run`/`submit` reads from a local file."
        ),
    )
    max_dataset_lines: int = Field(
        default=1_000_000, ge=1, le=100_000_000, description="Most lines in one dataset."
    )
    sql_max_bytes: int = Field(
        default=DEFAULT_SQL_MAX_BYTES,
        ge=1024,
        le=1024 * 1024 * 1024,
        description="Largest answer of POST /v1/sql (413 above), in bytes as encoded.",
    )
    # Two: the work is mostly Python, so on the GIL more threads add no throughput, only
    # more turns the event loop waits for (benchmarks/healthz_under_views.py: /healthz
    # p50 19 ms with 4 threads, 10 ms with 2; views faster too).
    heavy_requests: int = Field(
        default=2,
        ge=1,
        le=64,
        description=(
            "Heavy requests (run views, reports, trends, shadow comparisons, parsing an "
            "upload or a scenario) worked on at once, each in a thread off the event loop."
        ),
    )
    heavy_wait_s: float = Field(
        default=10.0,
        ge=0,
        le=300,
        description=(
            "How long a heavy request waits for one of those slots before it is answered "
            "503 with Retry-After."
        ),
    )


class EgressSettings(BaseModel):
    """Which provider base URLs may be contacted (checked on accept and before connecting)."""

    allow: list[str] = Field(
        default_factory=lambda: ["*"],
        description="Host glob patterns allowed (e.g. '*.together.xyz'); '*' allows any.",
    )
    allow_loopback: bool = Field(default=False, description="Allow 127.0.0.0/8 and ::1.")
    allow_private: bool = Field(default=False, description="Allow RFC 1918 / ULA ranges.")


class ControlSettings(BaseModel):
    """Run lifecycle in the control plane."""

    max_attempts: int = Field(default=3, ge=1, description="Executions of a shard at most.")
    worker_lost_after_s: float = Field(
        default=8.0, gt=0, description="A running shard's worker without heartbeat this long."
    )
    no_worker_grace_s: float = Field(
        default=30.0, gt=0, description="Fail a region's pending shards after this long."
    )
    max_streams_per_shard: int = Field(
        default=512, ge=1, description="Streams one shard drives; larger levels are split."
    )
    max_queued_bytes: int = Field(
        default=64 * 2**20,
        ge=1,
        description=(
            "Redis bytes one run's shard messages (all stages at once) and its stored "
            "providers and workload may take; a larger run is refused when submitted "
            "(422). Redis runs with noeviction: a full Redis stops the whole service."
        ),
    )
    visibility_timeout_s: float = Field(
        default=12 * 3600.0, gt=0, description="Broker redelivery of unacknowledged tasks."
    )
    stall_timeout_s: float = Field(
        default=300.0,
        gt=0,
        description=(
            "A run with unsettled shards and no event, record or dispatch for this long: "
            "its stuck shards are re-dispatched once, then failed with the reason."
        ),
    )
    redis_patience_s: float = Field(
        default=60.0,
        gt=0,
        description=(
            "How long a worker keeps a shard's records buffered and retries while Redis "
            "is unreachable, before it stops the shard and reports the failure."
        ),
    )


class ScheduleSettings(BaseModel):
    """Schedules of the REST control plane and their regression webhooks (docs/tracking.md)."""

    min_interval_s: float = Field(
        default=MIN_SCHEDULE_INTERVAL_S,
        ge=1,
        description=(
            "Shortest gap between two fires of one schedule: a cron expression that fires "
            "more often is refused (422). Lowered only by tests, to see fires in seconds."
        ),
    )
    misfire_grace_s: float = Field(
        default=300.0,
        gt=0,
        description=(
            "A fire the running control plane could not start on time (an overloaded "
            "event loop) still starts up to this late; later, it is recorded as missed."
        ),
    )
    webhook_timeout_s: float = Field(
        default=10.0, gt=0, le=MAX_WEBHOOK_TIMEOUT_S, description="Deadline of one webhook try."
    )
    webhook_attempts: int = Field(
        default=3, ge=1, le=MAX_WEBHOOK_ATTEMPTS, description="Tries of one webhook notification."
    )


class TeamSettings(BaseModel):
    """What every team may do unless an admin set its own figure (docs/teams.md)."""

    visibility: Literal["org", "team"] = Field(
        default="org",
        description="Who reads a team's results by default: the whole organisation or the team.",
    )
    monthly_budget_usd: float | None = Field(
        default=None,
        ge=0,
        description="A team's spend per calendar month (UTC) on token-priced providers; "
        "none: unlimited.",
    )
    max_concurrent_runs: int = Field(default=4, ge=1, le=1000, description="Runs going at once.")
    max_queued_runs: int = Field(
        default=20, ge=0, le=10_000, description="Runs waiting for their targets at once."
    )
    max_schedules: int = Field(default=50, ge=0, le=10_000, description="Active schedules.")
    max_dataset_bytes: int = Field(
        default=1024**3, ge=0, description="Bytes of uploaded datasets a team keeps."
    )
    requests_per_s: float = Field(
        default=20.0, gt=0, le=10_000, description="API requests per second per token."
    )
    request_burst: int = Field(
        default=40, ge=1, le=100_000, description="API requests a token may send at once."
    )
    max_tokens: int = Field(
        default=10_000, ge=1, le=1_000_000, description="Tokens minted in all (bounds the table)."
    )


class Settings(BaseSettings):
    """All tokenbench settings."""

    model_config = SettingsConfigDict(
        env_prefix="TOKENBENCH__", env_nested_delimiter="__", extra="ignore"
    )

    redis: RedisSettings = Field(default_factory=RedisSettings)
    duckdb: DuckDBSettings = Field(default_factory=DuckDBSettings)
    publish: PublishSettings = Field(default_factory=PublishSettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    egress: EgressSettings = Field(default_factory=EgressSettings)
    control: ControlSettings = Field(default_factory=ControlSettings)
    schedules: ScheduleSettings = Field(default_factory=ScheduleSettings)
    teams: TeamSettings = Field(default_factory=TeamSettings)
    regions: list[str] = Field(
        default_factory=list, description="Regions the deployment expects (shown in /readyz)."
    )


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once from the environment."""
    return Settings()


def env_name(path: str) -> str:
    """The environment variable a user sets for the setting at ``path``, for messages:
    ``egress.allow_loopback`` → ``TOKENBENCH__EGRESS__ALLOW_LOOPBACK``. A path that names
    no setting raises ``KeyError``, so a renamed setting cannot leave a message naming a
    variable that no longer exists."""
    model: type[BaseModel] = Settings
    parts = path.split(".")
    for depth, part in enumerate(parts):
        field = model.model_fields.get(part)
        if field is None:
            raise KeyError(f"no setting {path!r}")
        if depth < len(parts) - 1:
            group = field.annotation
            if not (isinstance(group, type) and issubclass(group, BaseModel)):
                raise KeyError(f"no setting {path!r}: {part} is not a group")
            model = group
    prefix = Settings.model_config.get("env_prefix", "")
    delimiter = Settings.model_config.get("env_nested_delimiter") or "__"
    return prefix + delimiter.join(part.upper() for part in parts)
