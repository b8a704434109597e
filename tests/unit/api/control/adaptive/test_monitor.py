"""Early ends of a running stage on a real DuckDB file: its records so far are stored,
and the check reads them (a percentile known precisely enough, a capacity verdict
already certain)."""

from __future__ import annotations

import duckdb

from analytics.decide.saturation import ShardSamples
from analytics.store.ingest import BatchMessage, ingest_batches
from api.control.adaptive.monitor import MonitorInput, ProviderLive, monitor_stage
from api.control.run_coordinator import RunCoordinator
from scenarios.wire.records import batch_to_ipc, records_to_batch
from tests.support.adaptive import create, ingest_stage, paced, scenario
from tests.support.builders import MS, S, ok_result
from workers.client.result import RequestResult
from workers.prompts.plan import PlannedRequest
from workers.shard.rows import RowContext, record_row


def live(records: int, seconds: int) -> ProviderLive:
    samples = ShardSamples([(float(t), records * t // seconds, records * t // seconds)
                            for t in range(1, seconds + 1)])  # fmt: skip
    return ProviderLive(None, None, None, float(seconds), 3000, records, {"local": [samples]})


def test_a_running_stage_stops_once_its_percentile_is_known_precisely_enough(
    con: duckdb.DuckDBPyConnection,
) -> None:
    spec = scenario(
        {
            "concurrency": [2],
            "requests_per_level": 3000,
            "stop_when": {"metric": "ttft", "quantile": 0.5, "rel_ci": 0.05, "min_requests": 50},
        }
    )
    coordinator = create(con, spec)
    # Not settled: the stage is running; its records so far are stored.
    wide = [ok_result(10 * S + i * 50 * MS, 50.0 + (i % 10) * 20, [5.0] * 3) for i in range(30)]
    ingest_stage(con, coordinator, 0, {"p0": wide}, settle=False)
    inputs = MonitorInput("run", 0, spec, [("s0.p0.local", 1)], {"p0": live(30, 3)}, {})
    assert monitor_stage(con, inputs).decisions == []  # 30 < min_requests
    steady = [ok_result(20 * S + i * 50 * MS, 80.0 + (i % 3), [5.0] * 3) for i in range(400)]
    ingest_batches(
        con,
        [BatchMessage("run", "s0.p0.local", 1, 1, _batch(coordinator, steady, offset=30))],
    )
    (decision,) = monitor_stage(con, inputs).decisions
    assert decision.outcome == "stopped_early" and decision.acted
    region = decision.evidence["regions"]["local"]
    assert region["n"] == 430 and region["relative_half_width"] <= 0.05
    assert "TTFT p50 known within" in decision.reason


def _batch(coordinator: RunCoordinator, results: list[RequestResult], offset: int) -> bytes:
    spec = coordinator.stages[0].shards[0]
    ctx = RowContext("run", 0, spec.shard_id, 1, "p0", "m", "local", "w", "closed", 2)
    rows = [
        record_row(ctx, PlannedRequest(offset + i, 8, 4, "p"), r) for i, r in enumerate(results)
    ]
    return batch_to_ipc(records_to_batch(rows))


def test_a_capacity_stage_is_ended_early_once_it_certainly_fails_never_when_it_passes(
    con: duckdb.DuckDBPyConnection,
) -> None:
    spec = scenario(
        {"find_capacity": {"slo": {"ttft_ms": 100}, "attainment": 0.9}, "requests_per_level": 400}
    )
    coordinator = create(con, spec)
    ingest_stage(con, coordinator, 0, {"p0": paced(200, 4, 50)}, settle=False)
    probe = ProviderLive("synchronous", None, None, 50.0, 400, 200, {"local": []})
    inputs = MonitorInput("run", 0, spec, [("s0.p0.local", 1)], {"p0": probe}, {})
    passing = monitor_stage(con, inputs)
    # Every request so far met the SLO: that is no reason to stop (the last ones may not).
    assert passing.decisions == [] and passing.looks == {"p0": 1}
    slow = [ok_result(80 * S + i * 100 * MS, 400.0, [5.0] * 3) for i in range(300)]
    ingest_batches(con, [BatchMessage("run", "s0.p0.local", 1, 1, _batch(coordinator, slow, 200))])
    looked = MonitorInput("run", 0, spec, inputs.attempts, {"p0": probe}, passing.looks)
    result = monitor_stage(con, looked)
    (decision,) = result.decisions
    assert decision.outcome == "stopped_early" and decision.evidence["verdict"] == "fail"
    assert result.looks == {"p0": 2} and decision.evidence["confidence"] > 0.95
    assert decision.reason.startswith("decided early: does not hold (attainment 200/500")
