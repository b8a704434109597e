"""Deciding stages on a real DuckDB file: a run is created as the control plane creates
it, its stages' records are ingested and settled, and the decisions are read back from
what was stored (the plan, the roles, the verdicts)."""

from __future__ import annotations

import duckdb
import pytest

from analytics.store.adaptive_runs import capacity_rows, role_rows, verdict_rows
from analytics.store.runs import RunStore
from api.control.adaptive.decide import decide_next
from api.control.planner import stored_stages
from api.control.run_views import stored_view
from tests.support.adaptive import create, ingest_stage, paced, scenario


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
