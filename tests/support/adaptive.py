"""Adaptive runs on a real DuckDB file, as the control plane creates them: a scenario of
simulated providers, paced results, and a stage's records ingested (and settled) as its
shards' first attempts (tests/unit/api/control/adaptive/)."""

from __future__ import annotations

from typing import Any

import duckdb

from analytics.store.ingest import BatchMessage, ingest_batches
from analytics.store.runs import RunStore
from api.control.run_coordinator import RunCoordinator
from scenarios.model import Scenario
from scenarios.stages import load_kind
from scenarios.wire.records import batch_to_ipc, records_to_batch
from tests.support.builders import S, ok_result
from workers.client.result import RequestResult
from workers.prompts.plan import PlannedRequest
from workers.shard.rows import RowContext, record_row


def scenario(load: dict[str, Any], providers: int = 1) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "adaptive",
            "providers": [{"name": f"p{i}", "kind": "simulated"} for i in range(providers)],
            "workload": {
                "mix": [
                    {
                        "prompt_tokens": {"dist": "fixed", "value": 8},
                        "output_tokens": {"dist": "fixed", "value": 4},
                    }
                ]
            },
            "load": load,
        }
    )


def paced(n: int, per_s: float, ttft_ms: float) -> list[RequestResult]:
    """``n`` requests at ``per_s`` a second, each with this TTFT and 3 gaps of 5 ms."""
    return [ok_result(10 * S + round(i * S / per_s), ttft_ms, [5.0] * 3) for i in range(n)]


def ingest_stage(
    con: duckdb.DuckDBPyConnection,
    coordinator: RunCoordinator,
    stage: int,
    results: dict[str, list[RequestResult]],
    settle: bool = True,
) -> None:
    """Store each provider's results as its shard's attempt 1, and settle it."""
    for spec in coordinator.stages[stage].shards:
        ctx = RowContext(
            coordinator.run_id, stage, spec.shard_id, 1, spec.provider.name, "m", spec.region,
            "w", load_kind(spec), spec.concurrency,
        )  # fmt: skip
        rows = [
            record_row(ctx, PlannedRequest(i, 8, 4, "p"), r)
            for i, r in enumerate(results[spec.provider.name])
        ]
        batch = batch_to_ipc(records_to_batch(rows))
        ingest_batches(con, [BatchMessage(coordinator.run_id, spec.shard_id, 1, 0, batch)])
        if settle:
            RunStore(con).shard_done(coordinator.run_id, spec.shard_id, "finished", 1, None)


def create(con: duckdb.DuckDBPyConnection, spec: Scenario) -> RunCoordinator:
    return RunCoordinator.create("run", spec, RunStore(con), 512)
