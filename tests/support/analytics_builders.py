"""Builders for the analytics tests: request results with chosen latencies, and runs
stored in a real DuckDB file along the control plane's own path (create the run, ingest
Arrow batches, settle each shard)."""

from __future__ import annotations

from collections.abc import Mapping
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

# A group of a run: (provider, stage, region).
Group = tuple[str, int, str]


def ok_result(sent: int, ttft_ms: float, gaps_ms: list[float], prompt: int = 50) -> RequestResult:
    """A successful request sent at ``sent`` (ns) with this TTFT and these token gaps."""
    first = sent + round(ttft_ms * MS)
    stamps = [first]
    for gap in gaps_ms:
        stamps.append(stamps[-1] + round(gap * MS))
    return RequestResult(
        intended_start=sent - MS,
        sent=sent,
        first_byte=first,
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


def failed_result(sent: int, error: ErrorClass) -> RequestResult:
    """A request that failed with ``error`` 5 ms after it was sent."""
    return RequestResult(
        intended_start=sent, sent=sent, end=sent + 5 * MS, failure=RequestFailure(error, "x")
    )


def ttft_ms(result: RequestResult) -> float:
    """The TTFT of a successful result as the records store it (ms)."""
    assert result.first_token is not None
    return (result.first_token - result.sent) / MS


def scenario(providers: list[dict[str, Any]], regions: list[str] | None = None) -> Scenario:
    """A closed-loop scenario over ``providers`` (one level; the shards say the rest)."""
    return Scenario.model_validate(
        {
            "name": "analytics-test",
            "providers": providers,
            "regions": regions or ["local"],
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
    )


def shard_id(group: Group) -> str:
    """The shard id a group's records are stored under."""
    provider, stage, region = group
    return f"s{stage}.{provider}.{region}"


def store_run(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    spec: Scenario,
    shards: Mapping[Group, list[RequestResult]],
    *,
    settle: bool = True,
) -> None:
    """Create the run with one shard per group, ingest each group's results as one
    batch of attempt 1 and (``settle``) settle the shard as finished."""
    RunStore(con).create_run(
        run_id,
        spec,
        [
            PlannedShard(shard_id(g), g[1], g[0], g[2], 1, len(results))
            for g, results in shards.items()
        ],
    )
    for group, results in shards.items():
        provider, stage, region = group
        ctx = RowContext(run_id, stage, shard_id(group), 1, provider, "m", region, "w", "closed", 1)
        rows = [record_row(ctx, PlannedRequest(i, 50, 100, "p"), r) for i, r in enumerate(results)]
        batch = batch_to_ipc(records_to_batch(rows))
        ingest_batches(con, [BatchMessage(run_id, shard_id(group), 1, 0, batch)])
        if settle:
            RunStore(con).shard_done(run_id, shard_id(group), "finished", 1, None)


def store_trend_runs(
    con: duckdb.DuckDBPyConnection,
    ttfts_ms: list[float],
    *,
    provider: str = "api",
    schedule_id: str = "sch-1",
    requests: int = 40,
) -> list[str]:
    """One finished run per TTFT (a schedule's runs, oldest first: ``run_origins`` names
    the schedule), each ``requests`` successful requests of that TTFT; their ids."""
    spec = scenario([{"name": provider, "kind": "simulated"}])
    ids = []
    for index, ttft in enumerate(ttfts_ms):
        run_id = f"{schedule_id}-r{index}"
        results = [ok_result(i * 20 * MS, ttft + 0.01 * i, [5.0] * 5) for i in range(requests)]
        store_run(con, run_id, spec, {(provider, 0, "local"): results})
        RunStore(con).finish_run(run_id, "finished")
        con.execute("INSERT INTO run_origins VALUES (?, 'sc-1', ?)", [run_id, schedule_id])
        ids.append(run_id)
    return ids
