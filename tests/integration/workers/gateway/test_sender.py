"""The gateway's shadow hand-off on a real broker: samples land on each region's queue in
batches, as Celery messages for the batch task, with their arrival offsets; a region whose
queue is backed up (counted in samples) is skipped, and a dead broker is counted, never
fatal."""

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
from scenarios.wire.contract import RUN_SHADOW_BATCH, ShadowBatch, region_queue
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


PROVIDERS = [{"name": "cand", "kind": "simulated"}]
MS = 1_000_000


def sender(broker: str, regions: list[str], **options: Any) -> ShadowSender:
    return ShadowSender(
        celery=sending_app(broker),
        broker_url=broker,
        run_id="sess",
        providers=PROVIDERS,
        regions=regions,
        max_pending=options.get("max_pending", 100),
        max_backlog=options.get("max_backlog", 100),
        ttl_s=options.get("ttl_s", 30.0),
        max_batch=options.get("max_batch", 64),
        max_batch_bytes=options.get("max_batch_bytes", 1 << 20),
    )


def sample(i: int) -> dict[str, Any]:
    return {
        "request_key": f"k{i}",
        "seq": i,
        "messages": [{"role": "user", "content": f"question {i}"}],
        "prompt_tokens": 2,
    }


def decode(message: bytes) -> tuple[dict[str, Any], list[Any]]:
    """Headers and arguments of a Celery message as kombu's Redis transport stores it."""
    envelope = orjson.loads(message)
    body = orjson.loads(base64.b64decode(envelope["body"]))
    return envelope["headers"], body[0]


def queued(client: redis.Redis, region: str) -> list[tuple[dict[str, Any], ShadowBatch]]:
    """Headers and batch of every message in the region's queue, oldest first."""
    # kombu pushes on the left and workers pop on the right: oldest last.
    messages = [decode(m) for m in reversed(client.lrange(region_queue(region), 0, -1))]
    return [(headers, ShadowBatch.model_validate(args[0])) for headers, args in messages]


def test_waiting_samples_go_to_every_region_as_one_batch_with_their_offsets(
    redis_server: RedisServer, regions: list[str]
) -> None:
    shadow = sender(redis_server.url, regions[:2], ttl_s=45)
    # Offered before the thread starts: it finds all three waiting and sends them at once.
    arrivals = [0, 7 * MS, 30 * MS]
    assert all(shadow.offer(sample(i), 100, 5 * MS + at) for i, at in enumerate(arrivals))
    shadow.start()
    try:
        wait_until(lambda: shadow.stats.sent == 6, "three samples to two regions")
    finally:
        shadow.stop()
        close(shadow.celery)
    assert shadow.stats.batches == 2
    assert shadow.stats.dropped_at_stop == shadow.stats.send_errors == 0
    with redis.Redis.from_url(redis_server.url) as client:
        for region in regions[:2]:
            ((headers, batch),) = queued(client, region)
            assert headers["task"] == RUN_SHADOW_BATCH
            assert headers["expires"] is not None  # a stale sample is never worked off
            assert batch.run_id == "sess"
            assert [p.name for p in batch.providers] == ["cand"]
            assert [s.request_key for s in batch.samples] == ["k0", "k1", "k2"]
            assert [s.offset_ms for s in batch.samples] == [0.0, 7.0, 30.0]
            assert batch.samples[2].messages == [{"role": "user", "content": "question 2"}]
        assert client.llen(region_queue(regions[2])) == 0


def test_batches_are_cut_at_their_sample_and_byte_bounds(
    redis_server: RedisServer, regions: list[str]
) -> None:
    shadow = sender(redis_server.url, regions[:1], max_batch=3, max_batch_bytes=1000)
    sizes = [100, 100, 100, 100, 950, 5000, 100]  # the 5,000-byte sample goes alone
    for i, size in enumerate(sizes):
        shadow.offer(sample(i), size, i * MS)
    shadow.start()
    try:
        wait_until(lambda: shadow.stats.sent == len(sizes), "every sample")
    finally:
        shadow.stop()
        close(shadow.celery)
    with redis.Redis.from_url(redis_server.url) as client:
        batches = [[s.seq for s in batch.samples] for _, batch in queued(client, regions[0])]
    assert batches == [[0, 1, 2], [3], [4], [5], [6]]
    # Each batch's offsets start from its own first sample.
    with redis.Redis.from_url(redis_server.url) as client:
        assert all(batch.samples[0].offset_ms == 0.0 for _, batch in queued(client, regions[0]))


def test_a_backed_up_region_is_skipped_and_counted_in_samples(
    redis_server: RedisServer, regions: list[str]
) -> None:
    backed_up, healthy = regions[0], regions[1]
    with redis.Redis.from_url(redis_server.url) as client:
        client.lpush(region_queue(backed_up), *[b"waiting"] * 5)
    shadow = sender(redis_server.url, [backed_up, healthy], max_backlog=3, max_batch=3)
    for i in range(4):  # two batches: three samples, then one
        shadow.offer(sample(i), 100, i * MS)
    shadow.start()
    try:
        wait_until(lambda: shadow.stats.sent + shadow.stats.dropped_backlog == 8, "both regions")
    finally:
        shadow.stop()
        close(shadow.celery)
    # The backed-up region gets nothing; the healthy one the first batch only, whose
    # three samples then fill its backlog of three.
    assert (shadow.stats.sent, shadow.stats.dropped_backlog, shadow.stats.batches) == (3, 5, 1)
    with redis.Redis.from_url(redis_server.url) as client:
        assert client.llen(region_queue(backed_up)) == 5
        assert [[s.seq for s in b.samples] for _, b in queued(client, healthy)] == [[0, 1, 2]]


def test_a_dead_broker_is_counted_and_the_sender_keeps_going() -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    shadow = sender(dead, ["eu"])
    shadow.start()
    try:
        shadow.offer(sample(0), 100, 0)
        wait_until(lambda: shadow.stats.send_errors == 1, "a failed send")
        assert shadow.offer(sample(1), 100, MS)  # the thread is still taking samples
        wait_until(lambda: shadow.stats.send_errors == 2, "a second failed send")
    finally:
        shadow.stop(timeout_s=0.5)
        close(shadow.celery)
    assert shadow.stats.sent == 0
