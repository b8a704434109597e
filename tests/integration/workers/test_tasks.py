"""The Celery tasks in a real worker process: a shadow task sent the way the gateway
sends it is executed on the region's worker and leaves its records on the stream."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

import pytest
import redis

from api.local.redis_server import RedisServer
from scenarios.wire import RUN_SHADOW, RUN_SHARD, RecordBatch, records_stream, region_queue
from tests.conftest import REPO, Proc
from tests.support.celery_sender import close, sending_app

pytestmark = pytest.mark.integration


def test_tasks_are_registered_under_the_wire_names() -> None:
    """The control plane and the gateway send by the names in scenarios.wire, without
    importing workers. Checked in a fresh process: reading a task's name configures the
    Celery app, once per process, from the environment of that moment."""
    code = (
        "import json; from workers.tasks import run_shadow, run_shard; "
        "print(json.dumps([run_shard.name, run_shadow.name]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=True,
    )
    assert json.loads(done.stdout.splitlines()[-1]) == [RUN_SHARD, RUN_SHADOW]


def test_a_shadow_task_runs_on_the_regions_worker(
    redis_server: RedisServer, eu_worker: Proc
) -> None:
    run_id = f"sess-{uuid.uuid4().hex[:8]}"
    payload = {
        "run_id": run_id,
        "request_key": "req-9",
        "seq": 0,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 2,
        "prompt_tokens": 1,
        "providers": [
            {"name": "cand", "kind": "simulated", "simulate": {"ttft_ms": 1, "itl_ms": 1}}
        ],
    }
    sender = sending_app(redis_server.url)
    try:
        sender.send_task(RUN_SHADOW, args=[payload], queue=region_queue("eu"))
    finally:
        close(sender)
    with redis.Redis.from_url(redis_server.url) as client:
        deadline = time.monotonic() + 90
        entries: list[tuple[bytes, dict[bytes, bytes]]] = []
        while not entries and time.monotonic() < deadline:
            entries = client.xrange(records_stream(run_id))
            time.sleep(0.1)
    assert entries, eu_worker.text()[-3000:]
    (batch,) = [RecordBatch.decode(fields) for _, fields in entries]
    assert (batch.shard_id, batch.rows) == ("shadow.cand.eu", 1)
