"""A worker's heartbeat on a real Redis: counted while it beats, gone at once when it
stops, and written again after Redis restarts empty."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable

import pytest
import redis

from api.local.redis_server import RedisServer, start_redis_server
from scenarios.wire.contract import heartbeat_key
from workers.runtime.worker_main import Heartbeat, live_workers

pytestmark = pytest.mark.integration


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.02)


def test_live_workers_counts_beating_workers_of_a_region(redis_server: RedisServer) -> None:
    region = f"hb-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(redis_server.url)
    # A period of 2 s: the keys (6 s) outlive any stall of the beating threads under load.
    beats = [Heartbeat(redis_server.url, region, f"w{i}", 4, period_s=2.0) for i in range(2)]
    other = Heartbeat(redis_server.url, f"{region}x", "w9", 4, period_s=2.0)
    try:
        assert live_workers(client, region) == 0
        for beat in (*beats, other):
            beat.start()
        wait_until(lambda: live_workers(client, region) == 2, "two heartbeats")
        payload = json.loads(client.get(heartbeat_key(region, "w0")) or b"{}")
        assert payload == {"region": region, "worker": "w0", "pid": os.getpid(), "concurrency": 4}
        # The key outlives a couple of missed beats, not more: a dead worker lapses by itself.
        assert 0 < client.pttl(heartbeat_key(region, "w0")) <= 6000
        beats[0].stop()
        assert live_workers(client, region) == 1  # removed at once, not at expiry
        for beat in (*beats, other):
            beat.stop()
        assert live_workers(client, region) == 0
    finally:
        for beat in (*beats, other):
            beat.stop()
            beat.client.close()
        client.close()


def test_heartbeat_is_written_again_after_redis_restarts_empty() -> None:
    server = start_redis_server()  # killed by this test: not the session's
    beat = Heartbeat(server.url, "eu", "w1", 1, period_s=0.1)
    client = redis.Redis.from_url(server.url)
    try:
        beat.start()
        wait_until(lambda: live_workers(client, "eu") == 1, "first beat")
        server.kill()
        time.sleep(0.3)  # a few beats fail against the dead server
        server.restart(keep_data=False)
        wait_until(lambda: live_workers(client, "eu") == 1, "beat after the restart")
    finally:
        beat.stop()
        beat.client.close()
        client.close()
        server.kill()
        server.stop()
