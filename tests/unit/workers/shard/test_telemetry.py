"""The scraper's own logic (workers/shard/telemetry.py), against real loopback servers:
a scrape's deadline, the simulator's URL, which shards scrape, and how one scrape fails
(HTTP status, not Prometheus text, too large, too slow) without raising anything else.
The loop through Redis and DuckDB is tested in tests/integration/test_server_telemetry.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from scenarios.limits import MAX_METRICS_SCRAPE_S
from scenarios.loader import validate_scenario
from scenarios.providers.simulate import SimulateSpec
from scenarios.settings import ControlSettings, EgressSettings, Settings, get_settings
from scenarios.wire.contract import ShardSpec
from workers.runtime.context import WorkerContext
from workers.shard.telemetry import (
    MetricsScraper,
    ScrapeFailed,
    Target,
    check_content_type,
    fetch,
    parse_body,
    read_bounded,
    scrape_timeout_s,
    simulator_metrics_url,
)
from workers.simulator.pool import SimulatorPool
from workers.simulator.server import SimulatorApp, start_server


def test_a_scrape_never_outlasts_the_interval_or_the_bound() -> None:
    assert scrape_timeout_s(0.25) == 1.0
    assert scrape_timeout_s(4.0) == 4.0
    assert scrape_timeout_s(60.0) == MAX_METRICS_SCRAPE_S


def test_a_simulator_path_is_joined_to_its_root() -> None:
    assert simulator_metrics_url("http://127.0.0.1:81/v1", "/metrics") == (
        "http://127.0.0.1:81/metrics"
    )


def test_only_prometheus_text_is_read() -> None:
    check_content_type(None)
    check_content_type("text/plain; version=0.0.4; charset=utf-8")
    check_content_type("application/openmetrics-text; version=1.0.0")
    with pytest.raises(ScrapeFailed, match="application/json"):
        check_content_type("application/json")


def _spec(provider: dict[str, Any], scrape: bool) -> ShardSpec:
    scenario = validate_scenario(
        {
            "name": "s",
            "providers": [{"name": "p", **provider}],
            "workload": {
                "mix": [
                    {
                        "prompt_tokens": {"dist": "fixed", "value": 4},
                        "output_tokens": {"dist": "fixed", "value": 2},
                    }
                ]
            },
            "load": {"concurrency": [1], "requests_per_level": 1},
        }
    )
    return ShardSpec(
        run_id="r",
        shard_id="s0.p.local",
        stage=0,
        region="local",
        provider=scenario.providers[0],
        workload=scenario.workload,
        seed=0,
        concurrency=1,
        scrape_metrics=scrape,
    )


def _context() -> WorkerContext:
    return WorkerContext(
        get_settings(),
        Redis.from_url("redis://127.0.0.1:1"),  # never connected by these tests
        httpx.AsyncClient(),
        SimulatorPool(),
        "w1",
        "local",
    )


def test_only_marked_shards_with_a_metrics_url_scrape() -> None:
    url = {"kind": "openai", "base_url": "http://h/v1", "model": "m"}
    scraped = {**url, "metrics_url": "http://h/metrics", "metrics_interval_s": 2.0}
    context = _context()
    assert MetricsScraper.for_shard(_spec(url, True), context, 1, None, None) is None
    assert MetricsScraper.for_shard(_spec(scraped, False), context, 1, None, None) is None
    scraper = MetricsScraper.for_shard(_spec(scraped, True), context, 1, None, None)
    assert scraper is not None and scraper.url == "http://h/metrics"
    assert scraper.interval_s == 2.0
    simulated = {"kind": "simulated", "metrics_url": "/metrics"}
    endpoint = "http://127.0.0.1:5/v1"
    scraper = MetricsScraper.for_shard(_spec(simulated, True), context, 1, None, endpoint)
    assert scraper is not None and scraper.url == "http://127.0.0.1:5/metrics"


@asynccontextmanager
async def _simulator() -> AsyncIterator[str]:
    server = await start_server(SimulatorApp(SimulateSpec(), "m"), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}"


@asynccontextmanager
async def _silent() -> AsyncIterator[str]:
    """A server that accepts and never answers."""

    done = asyncio.Event()
    handlers: set[asyncio.Task[Any]] = set()

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            handlers.add(task)
        await reader.read(1)
        await done.wait()
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            done.set()
            await asyncio.gather(*handlers)  # each closes its side


def test_a_scrape_of_the_simulator_reads_its_series() -> None:
    async def main() -> int:
        async with _simulator() as root, httpx.AsyncClient() as client:
            body = await fetch(client, Target(f"{root}/metrics", {}), 5.0)
            return len(parse_body(body).samples)

    assert asyncio.run(main()) == 4  # running, waiting and two counters (no KV: fixed)


@pytest.mark.parametrize(
    ("path", "message", "status"),
    [
        ("/no-such-path", "HTTP 404", 404),
        ("/v1/models", "application/json, not Prometheus text", None),
    ],
)
def test_a_failed_scrape_says_why(path: str, message: str, status: int | None) -> None:
    async def main() -> ScrapeFailed:
        async with _simulator() as root, httpx.AsyncClient() as client:
            with pytest.raises(ScrapeFailed) as failed:
                await fetch(client, Target(f"{root}{path}", {}), 5.0)
            return failed.value

    failure = asyncio.run(main())
    assert message in str(failure) and failure.http_status == status


def test_a_silent_or_closed_endpoint_is_a_scrape_error() -> None:
    async def main() -> tuple[str, str]:
        async with _silent() as root, httpx.AsyncClient() as client:
            with pytest.raises(ScrapeFailed) as slow:
                await fetch(client, Target(f"{root}/metrics", {}), 0.2)
        async with httpx.AsyncClient() as client:
            with pytest.raises(ScrapeFailed) as closed:
                await fetch(client, Target(root + "/metrics", {}), 1.0)
        return str(slow.value), str(closed.value)

    slow, closed = asyncio.run(main())
    assert slow == "no complete answer within 0.2 s"
    assert "ConnectError" in closed


def test_a_body_above_the_bound_is_not_read_whole() -> None:
    async def main() -> str:
        async with (
            _simulator() as root,
            httpx.AsyncClient() as client,
            client.stream("GET", f"{root}/metrics") as response,
        ):
            with pytest.raises(ScrapeFailed) as failed:
                await read_bounded(response, limit=64)
        return str(failed.value)

    assert "larger than 64 bytes" in asyncio.run(main())


def test_a_url_refused_after_dns_is_one_scrape_error_and_nothing_is_sent() -> None:
    # A worker whose policy refuses loopback; Redis unreachable, so the row cannot be
    # published either: after the (short) patience it is logged and dropped, and the
    # scraper still returns rather than failing the shard.
    settings = Settings(
        egress=EgressSettings(allow_loopback=False),
        control=ControlSettings(redis_patience_s=0.3),
    )
    context = WorkerContext(
        settings,
        Redis.from_url("redis://127.0.0.1:1"),
        httpx.AsyncClient(),
        SimulatorPool(),
        "w1",
        "local",
    )

    async def main() -> tuple[int, list[dict[str, object]]]:
        async with _simulator() as root:
            provider = {"kind": "openai", "base_url": f"{root}/v1", "model": "m",
                        "metrics_url": f"{root}/metrics"}  # fmt: skip
            scraper = MetricsScraper.for_shard(_spec(provider, True), context, 1, None, None)
            assert scraper is not None
            async with scraper:
                pass
            return scraper.published, scraper.pending

    published, (row,) = asyncio.run(main())
    assert published == 0
    assert row["status"] == "error" and row["samples"] == []
    assert str(row["error_message"]).startswith("refused by the egress policy: host '127.0.0.1'")
    assert "ALLOW_LOOPBACK" in str(row["error_message"])
