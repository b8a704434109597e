"""An open-loop shard through the real execution path: planner spec → execute_shard →
Arrow batches and the shard_finished event on a real Redis."""

from __future__ import annotations

import asyncio
import json
import urllib.request

import pyarrow as pa
import pytest
from redis.asyncio import Redis

from api.control.planner import plan_run
from api.local.redis_server import RedisServer
from scenarios.load.client_bound import ClientHealth, client_bound_reasons
from scenarios.loader import validate_scenario
from scenarios.settings import EgressSettings, RedisSettings, Settings
from scenarios.wire.contract import ShardSpec, events_stream, records_stream
from scenarios.wire.records import ipc_to_table
from tests.fakes.load_harness import sse_server
from tests.fakes.sse_server import prompt_key
from workers.client.http import make_client
from workers.prompts.plan import request_planner
from workers.runtime.context import WorkerContext
from workers.runtime.event_loop import new_loop
from workers.shard.execute import execute_shard
from workers.simulator.pool import SimulatorPool

pytestmark = pytest.mark.integration

HEALTH_FIELDS = {
    "loop_lag_p50_ms", "loop_lag_p99_ms", "loop_lag_max_ms", "loop_stalls", "read_stalls",
    "loop_cpu_util", "process_cpu_util", "schedule_lag_p50_ms", "schedule_lag_p99_ms",
    "send_lag_p99_ms", "send_lag_share", "cap_waits", "requests_sent", "not_sent",
    "token_events", "first_tokens", "shared_stamps", "merged_tokens", "merged_first_tokens",
    "merge_error_p99_ms", "kernel_stamps", "client_bound", "client_bound_reasons",
    "client_bound_note", "target_rps", "scheduled_rps", "achieved_rps", "window_start_at",
    "steady_start_at", "steady_end_at", "window_end_at", "steady_requests", "load_kind",
    "prewarmed_connections", "prewarm_ms", "gc_collections", "gc_pause_total_ms",
    "gc_pause_max_ms",
}  # fmt: skip


def test_open_loop_shard_records_and_health(redis_server: RedisServer) -> None:
    with sse_server("--ttft-ms", "5", "--itl-ms", "2") as url:
        scenario = validate_scenario(
            {
                "name": "open",
                "seed": 11,
                "providers": [{"name": "fake", "kind": "openai", "base_url": url, "model": "m"}],
                "workload": {
                    "mix": [
                        {
                            "prompt_tokens": {"dist": "fixed", "value": 8},
                            "output_tokens": {"dist": "fixed", "value": 4},
                        }
                    ]
                },
                "load": {
                    "rate": {"rps": [40], "arrival": "poisson"},
                    "duration_s": 3,
                    "warmup_s": 1,
                    "cooldown_s": 0.5,
                },
            }
        )
        (stage,) = plan_run("open-run", scenario)
        (spec,) = stage.shards
        fields, table = asyncio.Runner(loop_factory=new_loop).run(_execute(spec, redis_server.url))
        with urllib.request.urlopen(f"{url}/requests", timeout=10) as answer:
            server_stamps = json.loads(answer.read())
    # Every request is found among the server's own stamps by its prompt's hash (the join of
    # benchmarks/end_to_end_accuracy.py), and the server's TTFT is its configured 5 ms or more.
    plan = request_planner(spec.workload, spec.seed, spec.stage)
    keys = [prompt_key(plan(seq).prompt) for seq in table.column("seq").to_pylist()]
    assert all(key in server_stamps for key in keys)
    assert all(server_stamps[key]["ttft_ns"] >= 5_000_000 for key in keys)
    # Its connections were opened before the stage clock started, and the shard says so:
    # one second of arrivals at 40 req/s.
    assert int(fields["prewarmed_connections"]) == 40 and float(fields["prewarm_ms"]) > 0
    assert set(table.column("load_kind").to_pylist()) == {"open"}
    assert table.num_rows > 60 and set(table.column("status").to_pylist()) == {"ok"}
    intended = table.column("intended_start_at").cast("int64").to_pylist()
    assert None not in intended
    lags = table.column("schedule_lag_ns").to_pylist()
    assert all(lag >= 0 for lag in lags)  # never sent before its time
    assert set(fields) >= HEALTH_FIELDS
    assert fields["load_kind"] == "open" and float(fields["target_rps"]) == 40
    start, steady_start = int(fields["window_start_at"]), int(fields["steady_start_at"])
    steady_end, end = int(fields["steady_end_at"]), int(fields["window_end_at"])
    assert steady_start - start == pytest.approx(1e9, abs=1e3)
    assert end - steady_end == pytest.approx(0.5e9, abs=1e3)
    steady = sum(steady_start <= t < steady_end for t in intended)
    assert int(fields["steady_requests"]) == steady and 0 < steady < table.num_rows
    verdict = client_bound_reasons(ClientHealth.from_fields(fields))
    assert ",".join(verdict) == fields["client_bound_reasons"]


async def _execute(spec: ShardSpec, redis_url: str) -> tuple[dict[str, str], pa.Table]:
    redis = Redis.from_url(redis_url)
    settings = Settings(
        redis=RedisSettings(url=redis_url), egress=EgressSettings(allow_loopback=True)
    )
    context = WorkerContext(settings, redis, make_client(), SimulatorPool(), "w1", "local")
    try:
        assert await execute_shard(spec, context) > 0
        events = await redis.xrange(events_stream(spec.run_id))
        finished = [
            {k.decode(): v.decode() for k, v in e.items()}
            for _, e in events
            if e[b"type"] == b"shard_finished"
        ]
        batches = await redis.xrange(records_stream(spec.run_id))
        tables = [ipc_to_table(e[b"ipc"]) for _, e in batches]
    finally:
        await context.http.aclose()
        await redis.aclose()
    return finished[0], pa.concat_tables(tables)
