"""Builders shared by test modules: scenarios, request results and stored runs.

Test modules never import each other; what more than one of them builds lives here.
"""

from __future__ import annotations

from typing import Any

import duckdb

from analytics.store.ingest import BatchMessage, ingest_batches
from analytics.store.runs import PlannedShard, RunStore
from scenarios.model import Scenario
from scenarios.wire.records import batch_to_ipc, records_to_batch
from workers.client.errors import ErrorClass, RequestFailure
from workers.client.result import RequestResult
from workers.prompts.plan import PlannedRequest
from workers.shard.rows import RowContext, record_row

MS = 1_000_000
S = 1_000_000_000

# ---------------------------------------------------------------------------- scenarios

# A scenario in YAML with a simulated and an OpenAI provider, two mixes and two levels.
VALID_SCENARIO = """\
name: ok
providers:
  - name: sim-fast
    kind: simulated
    simulate: {ttft_ms: 100, itl_ms: 10}
  - name: my-vllm
    kind: openai
    base_url: http://127.0.0.1:8000/v1
    model: llama-3.1-8b-instruct
    api_key_env: MY_KEY
    pricing: {input_per_mtok: 0.10, output_per_mtok: 0.20}
workload:
  mix:
    - {weight: 3, prompt_tokens: {dist: fixed, value: 128}, output_tokens: {dist: fixed, value: 64}}
    - {weight: 1, prompt_tokens: {dist: lognormal, mean: 2000, sigma: 0.5, min: 64, max: 8000}, output_tokens: {dist: uniform, min: 16, max: 512}}
load:
  concurrency: [1, 8]
  requests_per_level: 50
regions: [local]
slo: {ttft_ms: 500, tpot_ms: 50}
"""

# Three simulated providers: one priced per token, two priced per GPU hour.
REPORT_SCENARIO: dict[str, Any] = {
    "name": "report-test",
    "providers": [
        {
            "name": "api",
            "kind": "simulated",
            "pricing": {"input_per_mtok": 0.8, "output_per_mtok": 1.2},
        },
        # No gpu_hour_usd: the hardware catalog's h100 price applies.
        {"name": "gpu", "kind": "simulated", "deployment": {"hardware": "h100", "gpus": 8}},
        {
            "name": "own",
            "kind": "simulated",
            "deployment": {"hardware": "h100", "gpus": 2, "gpu_hour_usd": 2.0},
        },
    ],
    "workload": {
        "mix": [
            {
                "prompt_tokens": {"dist": "fixed", "value": 50},
                "output_tokens": {"dist": "fixed", "value": 100},
            }
        ]
    },
    "load": {"concurrency": [1], "requests_per_level": 10},
    "slo": {"ttft_ms": 150, "tpot_ms": 20},
}

# A user catalog file adding one model.
NEW_MODEL = """
models:
  - id: qwen2.5-72b
    name: Qwen2.5 72B
    params_billions: 72.7
    layers: 80
    hidden_size: 8192
    attention_heads: 64
    kv_heads: 8
    head_dim: 128
    context_tokens: 131072
"""

# ---------------------------------------------------------------------------- datasets

# A prompt file (a comment and a blank line between its two entries) and a traffic log
# whose lines are out of timestamp order.
PROMPTS = b'{"prompt": "hello"}\n# comment\n\n{"messages": [{"role": "user", "content": "hi"}]}\n'
TRAFFIC = (
    b'{"timestamp": 12.0, "prompt": "b", "max_tokens": 4}\n'
    b'{"timestamp": 10.0, "prompt": "a", "max_tokens": 2}\n'
    b'{"timestamp": 14.0, "prompt": "c", "max_tokens": 8}\n'
)

# ---------------------------------------------------------------------------- results

# The context of the rows ``timed_result`` builds into records.
ROW_CONTEXT = RowContext("run", 0, "s0.a.local", 1, "a", "m", "local", "w", "closed", 4)


def timed_result(
    sent: int, ttft_ms: float, gaps_ms: list[float], tokens: int | None = None
) -> RequestResult:
    """A success sent at ``sent`` (ns): first token after ``ttft_ms``, then one per gap.

    Scheduled 2 ms early, 10 prompt tokens; the completion counts one token per stamp
    unless ``tokens`` says otherwise (as a server's usage can).
    """
    first = sent + int(ttft_ms * MS)
    stamps = [first]
    for gap in gaps_ms:
        stamps.append(stamps[-1] + int(gap * MS))
    count = tokens if tokens is not None else len(stamps)
    return RequestResult(
        intended_start=sent - 2 * MS,
        sent=sent,
        first_byte=sent + MS,
        first_token=first,
        first_output_token=first,
        last_token=stamps[-1],
        end=stamps[-1] + MS,
        token_stamps=stamps,
        prompt_tokens=10,
        completion_tokens=count,
        token_count_source="usage",
        prompt_count_source="usage",
        finish_reason="length",
    )


def ok_result(sent: int, ttft_ms: float, gaps_ms: list[float], prompt: int = 50) -> RequestResult:
    """A success sent at ``sent`` (ns), 1 ms after its schedule, with ``prompt`` tokens in."""
    first = sent + round(ttft_ms * MS)
    stamps = [first]
    for gap in gaps_ms:
        stamps.append(stamps[-1] + round(gap * MS))
    return RequestResult(
        intended_start=sent - MS,
        sent=sent,
        first_byte=sent + MS // 2,
        first_token=first,
        first_output_token=first,
        last_token=stamps[-1],
        end=stamps[-1] + MS,
        token_stamps=stamps,
        prompt_tokens=prompt,
        completion_tokens=len(stamps),
        token_count_source="usage",
        prompt_count_source="usage",
        finish_reason="length",
    )


def failed_result(sent: int, error: ErrorClass, message: str = "x") -> RequestResult:
    """A request sent at ``sent`` (ns) that failed with ``error`` 5 ms later."""
    return RequestResult(
        intended_start=sent, sent=sent, end=sent + 5 * MS, failure=RequestFailure(error, message)
    )


def store_run(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    scenario: dict[str, Any],
    shards: dict[tuple[str, int], list[RequestResult]],
    concurrency: int = 1,
    load_kind: str = "closed",
) -> None:
    """Create the run and ingest one shard per (provider, stage) with these results."""
    planned = [
        PlannedShard(f"s{stage}.{p}.local", stage, p, "local", concurrency, len(results))
        for (p, stage), results in shards.items()
    ]
    RunStore(con).create_run(run_id, Scenario.model_validate(scenario), planned)
    for (provider, stage), results in shards.items():
        shard_id = f"s{stage}.{provider}.local"
        ctx = RowContext(
            run_id, stage, shard_id, 1, provider, "m", "local", "w", load_kind, concurrency
        )
        rows = [record_row(ctx, PlannedRequest(i, 50, 100, "p"), r) for i, r in enumerate(results)]
        ingest_batches(
            con, [BatchMessage(run_id, shard_id, 1, 0, batch_to_ipc(records_to_batch(rows)))]
        )
        RunStore(con).shard_done(run_id, shard_id, "finished", 1, None)


def evenly_paced(n: int, tokens: int = 100) -> list[RequestResult]:
    """Concurrency 1, one request per second, each 0.1 s TTFT + 99 gaps of ~1 ms ≈ 0.2 s."""
    return [ok_result(10 * S + i * S, 100.0, [1.0] * (tokens - 1)) for i in range(n)]
