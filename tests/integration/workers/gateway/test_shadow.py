"""Shadow tasks executed by a worker's code on a real Redis and a simulated provider:
one record per shadow provider, paired with the primary by its request key, a
misconfigured shadow recorded as an error rather than missing, the samples of a batch
sent at their arrival offsets, and nothing spent on a stopped session."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine
from typing import Any, TypeVar

import pyarrow as pa
import pytest
from redis.asyncio import Redis

from api.local.redis_server import RedisServer
from scenarios.settings import EgressSettings, RedisSettings, Settings
from scenarios.wire.contract import RecordBatch, ShadowBatch, ShadowTask, cancel_key, records_stream
from scenarios.wire.records import ipc_to_table
from workers.client.http import make_client
from workers.client.result import RequestResult
from workers.client.secrets import Secrets
from workers.gateway.shadow import execute_shadow, execute_shadow_batch, publish_rows
from workers.prompts.plan import PlannedRequest
from workers.runtime.context import WorkerContext
from workers.runtime.event_loop import new_loop
from workers.shard.rows import RowContext, record_row
from workers.simulator.pool import SimulatorPool

pytestmark = pytest.mark.integration

T = TypeVar("T")
COLUMNS = ["shard_id", "provider", "region", "load_kind", "request_key", "status", "error_class",
           "error_message", "completion_tokens", "attempt"]  # fmt: skip


def run(coro: Coroutine[Any, Any, T]) -> T:
    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(coro)


def task(run_id: str) -> ShadowTask:
    return ShadowTask.model_validate(
        {
            "run_id": run_id,
            "request_key": "req-1",
            "seq": 7,
            "messages": [{"role": "user", "content": "compare me"}],
            "max_tokens": 3,
            "params": {"temperature": 0.0},
            "prompt_tokens": 2,
            "providers": [
                {"name": "cand", "kind": "simulated", "simulate": {"ttft_ms": 2, "itl_ms": 1}},
                # Its key variable is bound to no host on this worker: it cannot be sent.
                {
                    "name": "keyless",
                    "kind": "openai",
                    "base_url": "http://127.0.0.1:9/v1",
                    "model": "m",
                    "api_key_env": "SHADOW_TEST_KEY",
                },
            ],
        }
    )


async def shadow_records(
    url: str, shadow: ShadowTask | ShadowBatch, *, stopped: bool = False
) -> tuple[int, list[RecordBatch]]:
    redis = Redis.from_url(url)
    settings = Settings(redis=RedisSettings(url=url), egress=EgressSettings(allow_loopback=True))
    context = WorkerContext(
        settings,
        redis,
        make_client(),
        SimulatorPool(),
        "w-test",
        "eu",
        Secrets({}, {"SHADOW_TEST_KEY": "k"}),
    )
    try:
        if stopped:
            await redis.set(cancel_key(shadow.run_id), 1)
        if isinstance(shadow, ShadowBatch):
            published = await execute_shadow_batch(shadow, context)
        else:
            published = await execute_shadow(shadow, context)
        entries = await redis.xrange(records_stream(shadow.run_id))
        return published, [RecordBatch.decode(fields) for _, fields in entries]
    finally:
        await context.http.aclose()
        await context.simulators.close()
        await redis.delete(cancel_key(shadow.run_id))
        await redis.aclose()


def test_each_shadow_provider_leaves_one_record_paired_by_request_key(
    redis_server: RedisServer,
) -> None:
    shadow = task(f"sess-{uuid.uuid4().hex[:8]}")
    published, batches = run(shadow_records(redis_server.url, shadow))
    assert published == 2
    assert sorted((b.shard_id, b.attempt, b.batch_seq, b.rows) for b in batches) == [
        ("shadow.cand.eu", 1, 1, 1),
        ("shadow.keyless.eu", 1, 1, 1),
    ]
    table = pa.concat_tables([ipc_to_table(b.ipc) for b in batches]).select(COLUMNS)
    rows = {r["provider"]: r for r in table.to_pylist()}
    cand, keyless = rows["cand"], rows["keyless"]
    for row in (cand, keyless):
        assert (row["region"], row["load_kind"], row["request_key"]) == ("eu", "shadow", "req-1")
    assert cand["status"] == "ok" and cand["completion_tokens"] == 3
    assert keyless["status"] == "error" and keyless["error_class"] == "connect"
    assert (
        keyless["error_message"].startswith("setup:")
        and "SHADOW_TEST_KEY" in keyless["error_message"]
    )


def test_a_stopped_session_gets_no_shadow_requests(redis_server: RedisServer) -> None:
    shadow = task(f"sess-{uuid.uuid4().hex[:8]}")
    assert run(shadow_records(redis_server.url, shadow, stopped=True)) == (0, [])


def batch(run_id: str, offsets_ms: list[float]) -> ShadowBatch:
    return ShadowBatch.model_validate(
        {
            "run_id": run_id,
            "providers": [
                {"name": "cand", "kind": "simulated", "simulate": {"ttft_ms": 2, "itl_ms": 1}}
            ],
            "samples": [
                {
                    "request_key": f"req-{i}",
                    "seq": i,
                    "messages": [{"role": "user", "content": f"sample {i}"}],
                    "max_tokens": 2,
                    "prompt_tokens": 2,
                    "offset_ms": offset,
                }
                for i, offset in enumerate(offsets_ms)
            ],
        }
    )


def test_a_batchs_samples_are_sent_at_their_arrival_offsets(redis_server: RedisServer) -> None:
    offsets = [0.0, 15.5, 40.0]
    shadow = batch(f"sess-{uuid.uuid4().hex[:8]}", offsets)
    published, batches = run(shadow_records(redis_server.url, shadow))
    assert published == 3
    table = pa.concat_tables([ipc_to_table(b.ipc) for b in batches])
    table = table.set_column(
        table.schema.get_field_index("intended_start_at"),
        "intended_start_at",
        table["intended_start_at"].cast(pa.int64()),
    )
    rows = sorted(table.select(["request_key", "intended_start_at", "status"]).to_pylist(),
                  key=lambda r: r["request_key"])  # fmt: skip
    assert [r["request_key"] for r in rows] == ["req-0", "req-1", "req-2"]
    assert all(r["status"] == "ok" for r in rows)
    # Each sample was planned its offset after the first: the live gaps, not a burst.
    first = rows[0]["intended_start_at"]
    assert [(r["intended_start_at"] - first) / 1e6 for r in rows] == offsets
    # Each sample is its own batch on the stream, published when its answers were in.
    assert sorted(b.batch_seq for b in batches) == [1, 2, 3]


def test_a_stopped_session_gets_no_batch_either(redis_server: RedisServer) -> None:
    shadow = batch(f"sess-{uuid.uuid4().hex[:8]}", [0.0, 1.0])
    assert run(shadow_records(redis_server.url, shadow, stopped=True)) == (0, [])


def test_batch_numbers_are_unique_across_publishers_of_a_shard(redis_server: RedisServer) -> None:
    """Many gateway and worker processes publish under one session shard: the Redis
    counter keeps the ingestor's (shard, attempt, batch) key unique among them."""
    run_id = f"sess-{uuid.uuid4().hex[:8]}"

    async def go() -> list[int]:
        publishers = [Redis.from_url(redis_server.url) for _ in range(3)]
        try:
            await asyncio.gather(
                *(publish_rows(r, run_id, "shadow.cand.eu", []) for r in publishers),  # no-op
            )
            await asyncio.gather(
                *(
                    publish_rows(r, run_id, "shadow.cand.eu", _rows(run_id, i))
                    for i, r in enumerate(publishers)
                )
            )
            entries = await publishers[0].xrange(records_stream(run_id))
            return sorted(RecordBatch.decode(f).batch_seq for _, f in entries)
        finally:
            for r in publishers:
                await r.aclose()

    assert run(go()) == [1, 2, 3]


def _rows(run_id: str, seq: int) -> list[dict[str, object]]:
    ctx = RowContext(
        run_id, 0, "shadow.cand.eu", 1, "cand", "m", "eu", "w", "shadow", 0, request_key=f"k{seq}"
    )
    result = RequestResult(intended_start=1, sent=1, end=2)
    return [record_row(ctx, PlannedRequest(seq, 1, 1, ""), result)]
