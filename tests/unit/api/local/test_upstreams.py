"""A local run's upstreams: started at their ports, their logs read into the run's file,
a taken port refused naming the field."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import httpx
import pytest

from analytics.store.db import connect
from api.local.redis_server import free_port
from api.local.upstreams import UpstreamCollector, local_upstreams
from scenarios.errors import BadInput
from scenarios.providers.upstreams import Upstream


def test_upstreams_serve_at_their_ports_and_their_logs_are_stored(tmp_path: Path) -> None:
    upstream = Upstream.model_validate(
        {"name": "up", "port": free_port(), "simulate": {"ttft_ms": 1, "itl_ms": 1,
         "faults": [{"kind": "http_5xx", "rate": 1, "status": 503}]}}
    )  # fmt: skip
    con = connect(tmp_path / "u.duckdb")
    with local_upstreams([upstream]):
        body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 2}
        for _ in range(3):
            answer = httpx.post(f"{upstream.base_url}/chat/completions", json=body, timeout=10)
            assert answer.status_code == 503

        async def collect() -> UpstreamCollector:
            collector = UpstreamCollector([upstream], con.cursor(), "run")
            follower = asyncio.create_task(collector.follow())
            await asyncio.sleep(0.1)
            await collector.finish(follower)
            return collector

        collector = asyncio.run(collect())
    assert collector.failures == []
    rows = con.execute(
        "SELECT upstream, seq, status, outcome FROM upstream_requests ORDER BY seq"
    ).fetchall()
    assert rows == [("up", i, 503, "http_5xx") for i in (1, 2, 3)]
    assert con.execute("SELECT upstream, port, entries, missed FROM upstream_logs").fetchall() == [
        ("up", upstream.port, 3, 0)
    ]
    with pytest.raises(httpx.ConnectError):  # stopped with the run
        httpx.get(f"http://127.0.0.1:{upstream.port}/health", timeout=2)


def test_a_taken_port_is_refused_before_anything_starts() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        first = Upstream(name="a", port=free_port())
        refused = rf"upstreams.1.port: 127.0.0.1:{port} cannot be used"
        with (
            pytest.raises(BadInput, match=refused),
            local_upstreams([first, Upstream(name="b", port=port)]),
        ):
            pytest.fail("started")
    with pytest.raises(httpx.ConnectError):  # the first one never started
        httpx.get(f"http://127.0.0.1:{first.port}/health", timeout=2)


def test_an_upstream_gone_is_a_failure_noted_not_raised(tmp_path: Path) -> None:
    gone = Upstream(name="gone", port=free_port())
    con = connect(tmp_path / "g.duckdb")

    async def collect() -> UpstreamCollector:
        collector = UpstreamCollector([gone], con.cursor(), "run")
        await collector.finish(None)
        return collector

    collector = asyncio.run(collect())
    assert len(collector.failures) == 1 and "upstream 'gone': log not read" in collector.failures[0]
    assert con.execute("SELECT entries, missed FROM upstream_logs").fetchall() == [(0, 0)]


def test_free_ports_are_below_the_ephemeral_range_and_bindable() -> None:
    # Outgoing connections take their source ports from the ephemeral range; a port
    # chosen there could be taken before the child binds it.
    from api.local.redis_server import _ephemeral_range

    low, _ = _ephemeral_range()
    for _ in range(20):
        port = free_port()
        assert port < low
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))
