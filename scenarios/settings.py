"""Process settings, from ``TOKENBENCH__...`` environment variables (one pydantic-settings model).

Nested groups use ``__`` as delimiter: ``TOKENBENCH__REDIS__URL`` sets ``redis.url``.
Settings are built on demand by :func:`get_settings`, never at import time, so tests and
subprocesses can set the environment first.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class RedisSettings(BaseModel):
    """Where the broker and the event/record streams live."""

    url: str | None = Field(
        default=None,
        description="redis:// URL; unset means `tokenbench run` starts an embedded server.",
    )


class DuckDBSettings(BaseModel):
    """The analytics database."""

    path: Path = Field(default=Path("tokenbench.duckdb"), description="DuckDB file.")


class PublishSettings(BaseModel):
    """How workers batch request records into Arrow record batches."""

    batch_rows: int = Field(default=256, ge=1, description="Flush after this many records.")
    batch_interval_s: float = Field(default=1.0, gt=0, description="...or after this long.")
    progress_interval_s: float = Field(default=1.0, gt=0, description="Progress event period.")


class WorkerSettings(BaseModel):
    """Settings of a worker process."""

    region: str = Field(default="local", description="Region whose queue this worker consumes.")
    heartbeat_s: float = Field(default=2.0, gt=0, description="Heartbeat period.")


class Settings(BaseSettings):
    """All tokenbench settings."""

    model_config = SettingsConfigDict(
        env_prefix="TOKENBENCH__", env_nested_delimiter="__", extra="ignore"
    )

    redis: RedisSettings = Field(default_factory=RedisSettings)
    duckdb: DuckDBSettings = Field(default_factory=DuckDBSettings)
    publish: PublishSettings = Field(default_factory=PublishSettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once from the environment."""
    return Settings()
