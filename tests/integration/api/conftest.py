"""A real REST control plane served in this process: ``create_app`` under uvicorn on a
free loopback port, on the session's Redis and a DuckDB file of its own.

The route tests talk to it over HTTP as any client would; in-process, it costs no
interpreter start, and a warning in a route fails the test (the suite turns warnings
into errors). No worker serves the regions these tests use (each test names its own, see :func:`lonely_region`),
so runs and sessions stay dispatched but unstarted: the routes are exercised without
generating load, and nothing reaches the workers of other tests sharing this Redis.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import redis
from celery import Celery
from pydantic import SecretStr

from api.local.redis_server import RedisServer
from api.rest.app import create_app
from scenarios.settings import (
    ApiSettings,
    DuckDBSettings,
    EgressSettings,
    RedisSettings,
    Settings,
    TeamSettings,
)
from scenarios.wire.contract import region_queue
from tests.conftest import API_TOKEN
from tests.support.served_app import served

# Small enough that an over-sized upload or SQL answer is cheap to make.
MAX_DATASET_BYTES = 4096
SQL_MAX_BYTES = 4096
# A region every deployment of these tests expects (shown by /readyz with 0 workers).
EXPECTED_REGION = "expected-nowhere"


@dataclass
class RestStack:
    """Where the app is served, an authenticated client for it, and its Redis."""

    base: str
    client: httpx.Client
    redis_url: str

    def anonymous(self) -> httpx.Client:
        """A client without a token (close it after use)."""
        return httpx.Client(base_url=self.base, timeout=30)


def lonely_region() -> str:
    """A region name of one test's own: no worker serves it."""
    return f"nowhere-{uuid.uuid4().hex[:8]}"


def run_scenario(region: str, levels: tuple[int, ...] = (1, 2)) -> dict[str, Any]:
    """A small valid scenario in ``region`` on a simulated provider."""
    return {
        "name": "routes",
        "providers": [{"name": "sim", "kind": "simulated", "simulate": {"ttft_ms": 5}}],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 4},
                    "output_tokens": {"dist": "fixed", "value": 2},
                }
            ]
        },
        "load": {"concurrency": list(levels), "requests_per_level": 3},
        "regions": [region],
    }


def gateway_config(region: str) -> dict[str, Any]:
    """A gateway in front of a loopback primary, mirroring to a simulated shadow."""
    return {
        "name": "routes-shadow",
        "primary": {
            "name": "prod",
            "kind": "openai",
            "base_url": "http://127.0.0.1:9/v1",
            "model": "m",
        },
        "shadows": [{"name": "cand", "kind": "simulated", "simulate": {"ttft_ms": 5}}],
        "sample_rate": 1.0,
        "regions": [region],
    }


@pytest.fixture(scope="session")
def rest_stack(
    redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RestStack]:
    """The control plane app served by uvicorn in a thread, for the whole session."""
    db = tmp_path_factory.mktemp("rest") / "api.duckdb"
    settings = Settings(
        redis=RedisSettings(url=redis_server.url),
        duckdb=DuckDBSettings(path=db),
        api=ApiSettings(
            tokens=[SecretStr(API_TOKEN)],
            max_dataset_bytes=MAX_DATASET_BYTES,
            sql_max_bytes=SQL_MAX_BYTES,
        ),
        egress=EgressSettings(allow_loopback=True),
        regions=[EXPECTED_REGION],
        # Runs here never end (no worker): team quotas and the request rate out of the way.
        teams=TeamSettings(max_concurrent_runs=1000, requests_per_s=10_000, request_burst=100_000),
    )
    # The broker client shards are sent through; no worker consumes these tests' queues.
    celery = Celery("rest-tests", set_as_current=False)
    app = create_app(settings, celery)
    with (
        served(app) as base,
        httpx.Client(
            base_url=base, headers={"authorization": f"Bearer {API_TOKEN}"}, timeout=30
        ) as client,
    ):
        yield RestStack(base, client, redis_server.url)
    # The tasks queued for the tests' lonely regions would wait there for ever.
    leftover = redis.Redis.from_url(redis_server.url)
    for key in leftover.scan_iter(match=f"{region_queue('nowhere-')}*"):
        leftover.delete(key)
    leftover.close()
