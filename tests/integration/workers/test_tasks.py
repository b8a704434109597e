"""The Celery tasks in a real worker process: a batch of shadow samples sent the way the
gateway sends it, and a single shadow task as gateways sent before batches, are executed
on the region's worker and leave their records on the stream."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

import pytest
import redis

from api.local.redis_server import RedisServer
from scenarios.wire.contract import (
    RUN_SHADOW,
    RUN_SHADOW_BATCH,
    RUN_SHARD,
    RecordBatch,
    records_stream,
    region_queue,
)
from tests.conftest import REPO, Proc
from tests.support.celery_sender import close, sending_app

pytestmark = pytest.mark.integration


def test_tasks_are_registered_under_the_wire_names() -> None:
    """The control plane and the gateway send by the names in scenarios.wire, without
    importing workers. Checked in a fresh process: reading a task's name configures the
    Celery app, once per process, from the environment of that moment."""
    code = (
        "import json; from workers.tasks import run_shadow, run_shadow_batch, run_shard; "
        "print(json.dumps([run_shard.name, run_shadow.name, run_shadow_batch.name]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=True,
    )
    assert json.loads(done.stdout.splitlines()[-1]) == [RUN_SHARD, RUN_SHADOW, RUN_SHADOW_BATCH]


def records_of(url: str, run_id: str, rows: int, log: Proc) -> list[RecordBatch]:
    """The run's record batches once they hold ``rows`` rows (90 s at most)."""
    with redis.Redis.from_url(url) as client:
        deadline = time.monotonic() + 90
        batches: list[RecordBatch] = []
        while sum(b.rows for b in batches) < rows and time.monotonic() < deadline:
            batches = [RecordBatch.decode(f) for _, f in client.xrange(records_stream(run_id))]
            time.sleep(0.1)
    assert sum(b.rows for b in batches) == rows, log.text()[-3000:]
    return batches


SHADOW = {"name": "cand", "kind": "simulated", "simulate": {"ttft_ms": 1, "itl_ms": 1}}


def test_shadow_tasks_run_on_the_regions_worker(redis_server: RedisServer, eu_worker: Proc) -> None:
    batch_run, single_run = (f"sess-{uuid.uuid4().hex[:8]}" for _ in range(2))
    sample = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "prompt_tokens": 1}
    batch = {
        "run_id": batch_run,
        "providers": [SHADOW],
        "samples": [
            {**sample, "request_key": "req-1", "seq": 1},
            {**sample, "request_key": "req-2", "seq": 2, "offset_ms": 20.0},
        ],
    }
    single = {
        **sample,
        "run_id": single_run,
        "request_key": "req-9",
        "seq": 0,
        "providers": [SHADOW],
    }
    sender = sending_app(redis_server.url)
    try:
        sender.send_task(RUN_SHADOW_BATCH, args=[batch], queue=region_queue("eu"))
        sender.send_task(RUN_SHADOW, args=[single], queue=region_queue("eu"))
    finally:
        close(sender)
    batches = records_of(redis_server.url, batch_run, 2, eu_worker)
    assert {(b.shard_id, b.rows) for b in batches} == {("shadow.cand.eu", 1)}
    (alone,) = records_of(redis_server.url, single_run, 1, eu_worker)
    assert (alone.shard_id, alone.rows) == ("shadow.cand.eu", 1)
