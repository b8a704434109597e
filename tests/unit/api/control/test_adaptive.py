"""Deciding stages and early ends on a real DuckDB file: a run is created as the control
plane creates it, its stages' records are ingested and settled, and the decisions are
read back from what was stored (the plan, the roles, the verdicts, the outcomes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from analytics.decide.saturation import ShardSamples
from analytics.store.adaptive_runs import capacity_rows, role_rows, verdict_rows
from analytics.store.db import connect
from analytics.store.ingest import BatchMessage, ingest_batches
from analytics.store.runs import RunStore
from api.control.adaptive import MonitorInput, ProviderLive, decide_next, monitor_stage
from api.control.coordinator import RunCoordinator
from api.control.planner import stored_stages
from api.control.run_views import stored_view
from scenarios.model import Scenario
from scenarios.records import batch_to_ipc, records_to_batch
from tests.support.builders import MS, S, ok_result
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
        load_kind = "open" if spec.rate is not None else "closed"
        ctx = RowContext(
            coordinator.run_id, stage, spec.shard_id, 1, spec.provider.name, "m", spec.region,
            "w", load_kind, spec.concurrency,
        )  # fmt: skip
        rows = [
            record_row(ctx, PlannedRequest(i, 8, 4, "p"), r)
            for i, r in enumerate(results[spec.provider.name])
        ]
        batch = batch_to_ipc(records_to_batch(rows))
        ingest_batches(con, [BatchMessage(coordinator.run_id, spec.shard_id, 1, 0, batch)])
        if settle:
            RunStore(con).shard_done(coordinator.run_id, spec.shard_id, "finished", 1, None)


@pytest.fixture
def con(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    return connect(tmp_path / "adaptive.duckdb")


def create(con: duckdb.DuckDBPyConnection, spec: Scenario) -> RunCoordinator:
    return RunCoordinator.create("run", spec, RunStore(con), 512)


def test_a_sweep_starts_with_two_stages_and_appends_its_rates_after_the_throughput_stage(
    con: duckdb.DuckDBPyConnection,
) -> None:
    spec = scenario(
        {"sweep": {"points": 3, "throughput_concurrency": 8}, "requests_per_level": 40}, 2
    )
    coordinator = create(con, spec)
    assert [(s.index, s.concurrency) for s in coordinator.stages] == [(0, 1), (1, 8)]
    assert [(r.stage, r.role) for r in role_rows(con, "run")] == [
        (0, "synchronous"), (0, "synchronous"), (1, "throughput"), (1, "throughput"),
    ]  # fmt: skip
    ingest_stage(con, coordinator, 0, {"p0": paced(40, 4, 50), "p1": paced(40, 2, 90)})
    ingest_stage(con, coordinator, 1, {"p0": paced(40, 20, 300), "p1": paced(40, 10, 600)})
    decided = decide_next(con, "run", spec, coordinator.stages, {"local": 1}, 512)
    assert decided.done and [s.index for s in decided.stages] == [2, 3, 4]
    rates = {name: [stage.rate_of(name) for stage in decided.stages] for name in ("p0", "p1")}
    # Each provider's points between its own synchronous and throughput rates.
    for points in rates.values():
        assert all(p is not None for p in points) and points == sorted(points)
    assert rates["p0"][0] != rates["p1"][0]
    # Appended to the stored plan: a restart reads the same stages back.
    stored = RunStore(con).stored_plan("run")
    assert stored is not None
    again = stored_stages([(s.stage_concurrency, s.spec) for s in stored])
    assert [s.index for s in again] == [0, 1, 2, 3, 4]
    assert again[3].rate_of("p1") == rates["p1"][1]
    # Deciding again (after a restart, all stages settled) appends nothing more.
    assert decide_next(con, "run", spec, again[:2] + decided.stages, {"local": 1}, 512).stages == []
    view = stored_view(con, "run")
    assert [s.role for s in view.stages] == ["synchronous", "throughput", "sweep", "sweep", "sweep"]
    assert view.stages[2].label.startswith("sweep · rates ")


def test_a_capacity_search_judges_each_stage_and_probes_the_middle_of_its_bracket(
    con: duckdb.DuckDBPyConnection,
) -> None:
    spec = scenario(
        {
            "find_capacity": {"slo": {"ttft_ms": 100}, "attainment": 0.9, "precision": 0.05},
            "requests_per_level": 80,
        }
    )
    coordinator = create(con, spec)
    ingest_stage(con, coordinator, 0, {"p0": paced(80, 4, 50)})
    ingest_stage(con, coordinator, 1, {"p0": paced(80, 16, 400)})
    decided = decide_next(con, "run", spec, coordinator.stages, {"local": 1}, 512)
    (stage,) = decided.stages
    assert not decided.done and stage.index == 2
    probe = stage.rate_of("p0")
    assert probe is not None
    sync = con.execute("SELECT request_rate FROM stage_summary WHERE stage = 0").fetchone()
    top = con.execute("SELECT request_rate FROM stage_summary WHERE stage = 1").fetchone()
    assert sync is not None and top is not None
    assert probe == pytest.approx((sync[0] * top[0]) ** 0.5, rel=1e-3)
    (verdict,) = verdict_rows(con, "run")  # the synchronous stage: every request met 100 ms
    assert (verdict.stage, verdict.verdict, verdict.met, verdict.requests) == (0, "pass", 80, 80)
    assert verdict.regions["local"]["verdict"] == "pass"
    (search,) = capacity_rows(con, "run")
    assert search.state == "searching" and search.stages == 2
    # The probe fails (every request too slow): the search goes below it.
    coordinator.add_stages(decided.stages, decided.roles)
    ingest_stage(con, coordinator, 2, {"p0": paced(80, probe, 500)})
    decided = decide_next(con, "run", spec, coordinator.stages, {"local": 1}, 512)
    (below,) = decided.stages
    lower = below.rate_of("p0")
    assert lower is not None and lower < probe
    assert [v.verdict for v in verdict_rows(con, "run")] == ["pass", "fail"]


def test_a_search_whose_synchronous_stage_fails_ends_unattainable(
    con: duckdb.DuckDBPyConnection,
) -> None:
    spec = scenario(
        {"find_capacity": {"slo": {"ttft_ms": 10}, "attainment": 0.9}, "requests_per_level": 60}
    )
    coordinator = create(con, spec)
    ingest_stage(con, coordinator, 0, {"p0": paced(60, 4, 50)})
    ingest_stage(con, coordinator, 1, {"p0": paced(60, 16, 400)})
    decided = decide_next(con, "run", spec, coordinator.stages, {"local": 1}, 512)
    assert decided.done and decided.stages == []
    (search,) = capacity_rows(con, "run")
    assert search.state == "unattainable" and "one stream" in search.message


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


def test_an_open_loop_probe_runs_long_enough_to_send_what_a_pass_needs(
    con: duckdb.DuckDBPyConnection,
) -> None:
    spec = scenario(
        {
            "find_capacity": {"slo": {"ttft_ms": 100}, "attainment": 0.9},
            "requests_per_level": 80,
            "duration_s": 2,
        }
    )
    coordinator = create(con, spec)
    assert coordinator.stages[0].shards[0].duration_s == 2  # planned stages as configured
    ingest_stage(con, coordinator, 0, {"p0": paced(80, 4, 50)})
    ingest_stage(con, coordinator, 1, {"p0": paced(80, 16, 400)})
    (stage,) = decide_next(con, "run", spec, coordinator.stages, {"local": 1}, 512).stages
    (shard,) = stage.shards
    rate = stage.rate_of("p0")
    search = spec.load.find_capacity
    assert rate is not None and search is not None and search.requests_to_pass() == 46
    # 2 s at ~8 req/s would send 16 requests, never enough to pass: the probe runs longer,
    # and its requests stay bounded by requests_per_level.
    assert shard.duration_s == pytest.approx(1.25 * 46 / rate)
    assert shard.requests == 80
