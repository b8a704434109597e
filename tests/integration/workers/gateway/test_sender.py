"""The gateway's shadow hand-off on a real broker: tasks land on each region's queue as
Celery messages for the shadow task, a region whose queue is backed up is skipped, and a
dead broker is counted, never fatal."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
import redis

from api.local.redis_server import RedisServer, free_port
from scenarios.wire import RUN_SHADOW, region_queue
from tests.support.celery_sender import close, sending_app
from workers.gateway.sender import ShadowSender

pytestmark = pytest.mark.integration


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.02)


@pytest.fixture
def regions(redis_server: RedisServer) -> Iterator[list[str]]:
    """Three regions no worker consumes; their queues are removed afterwards."""
    names = [f"gw-{uuid.uuid4().hex[:8]}-{i}" for i in range(3)]
    yield names
    with redis.Redis.from_url(redis_server.url) as client:
        client.delete(*(region_queue(n) for n in names))


def sender(broker: str, regions: list[str], **options: Any) -> ShadowSender:
    return ShadowSender(
        celery=sending_app(broker),
        broker_url=broker,
        regions=regions,
        max_pending=options.get("max_pending", 100),
        max_backlog=options.get("max_backlog", 100),
        ttl_s=options.get("ttl_s", 30.0),
    )


def decode(message: bytes) -> tuple[dict[str, Any], list[Any]]:
    """Headers and arguments of a Celery message as kombu's Redis transport stores it."""
    envelope = orjson.loads(message)
    body = orjson.loads(base64.b64decode(envelope["body"]))
    return envelope["headers"], body[0]


def test_each_sample_becomes_a_shadow_task_on_every_regions_queue(
    redis_server: RedisServer, regions: list[str]
) -> None:
    shadow = sender(redis_server.url, regions[:2], ttl_s=45)
    shadow.start()
    payloads = [{"run_id": "sess", "request_key": f"k{i}", "seq": i} for i in range(3)]
    try:
        assert all(shadow.offer(p) for p in payloads)
        wait_until(lambda: shadow.stats.sent == 6, "six tasks sent")
    finally:
        shadow.stop()
        close(shadow.celery)
    assert shadow.stats.dropped_at_stop == shadow.stats.send_errors == 0
    with redis.Redis.from_url(redis_server.url) as client:
        for region in regions[:2]:
            # kombu pushes on the left and workers pop on the right: oldest last.
            messages = [decode(m) for m in reversed(client.lrange(region_queue(region), 0, -1))]
            assert [args for _, args in messages] == [[p] for p in payloads]
            for headers, _ in messages:
                assert headers["task"] == RUN_SHADOW
                assert headers["expires"] is not None  # a stale sample is never worked off
        assert client.llen(region_queue(regions[2])) == 0


def test_a_backed_up_region_is_skipped_and_counted(
    redis_server: RedisServer, regions: list[str]
) -> None:
    backed_up, healthy = regions[0], regions[1]
    with redis.Redis.from_url(redis_server.url) as client:
        client.lpush(region_queue(backed_up), *[b"waiting"] * 5)
    shadow = sender(redis_server.url, [backed_up, healthy], max_backlog=5)
    shadow.start()
    try:
        shadow.offer({"seq": 0})
        wait_until(lambda: shadow.stats.sent + shadow.stats.dropped_backlog == 2, "both regions")
    finally:
        shadow.stop()
        close(shadow.celery)
    assert (shadow.stats.sent, shadow.stats.dropped_backlog) == (1, 1)
    with redis.Redis.from_url(redis_server.url) as client:
        assert client.llen(region_queue(backed_up)) == 5
        assert client.llen(region_queue(healthy)) == 1


def test_a_dead_broker_is_counted_and_the_sender_keeps_going() -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    shadow = sender(dead, ["eu"])
    shadow.start()
    try:
        shadow.offer({"seq": 0})
        wait_until(lambda: shadow.stats.send_errors == 1, "a failed send")
        assert shadow.offer({"seq": 1})  # the thread is still taking samples
        wait_until(lambda: shadow.stats.send_errors == 2, "a second failed send")
    finally:
        shadow.stop(timeout_s=0.5)
        close(shadow.celery)
    assert shadow.stats.sent == 0
