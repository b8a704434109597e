"""Run planning: stages in order, shards per provider × region × part, disjoint requests."""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics.store.db import connect
from analytics.store.runs import RunStore
from api.control.planner import (
    plan_run,
    planned_shards,
    resets_cache,
    scrapes_metrics,
    stored_stages,
)
from api.control.run_coordinator import RunCoordinator
from api.control.run_views import stored_view
from scenarios.limits import MAX_SHARDS_PER_RUN
from scenarios.loader import ScenarioError, parse_scenario
from scenarios.model import Scenario
from tests.support.builders import VALID_SCENARIO


def test_stages_follow_concurrency_levels_and_cover_every_provider_and_region() -> None:
    scenario = parse_scenario(VALID_SCENARIO)
    stages = plan_run("r", scenario)
    assert [s.concurrency for s in stages] == [1, 8]
    assert [len(s.shards) for s in stages] == [2, 2]
    assert {sh.shard_id for sh in stages[1].shards} == {"s1.sim-fast.local", "s1.my-vllm.local"}


def test_high_concurrency_is_split_into_parts_with_disjoint_request_ranges() -> None:
    scenario = parse_scenario(
        VALID_SCENARIO.replace("concurrency: [1, 8]", "concurrency: [1000]").replace(
            "requests_per_level: 50", "requests_per_level: 3001"
        )
    )
    (stage,) = plan_run("r", scenario, max_streams_per_shard=300)
    parts = [s for s in stage.shards if s.provider.name == "sim-fast"]
    assert [p.concurrency for p in parts] == [250, 250, 250, 250]
    ranges = [range(p.seq_start, p.seq_start + (p.requests or 0)) for p in parts]
    assert sorted(seq for r in ranges for seq in r) == list(range(3001))
    assert [p.shard_id for p in parts] == [f"s0.sim-fast.local.{i}" for i in range(4)]


OPEN = VALID_SCENARIO.replace(
    "  concurrency: [1, 8]\n  requests_per_level: 50\n",
    "  rate: {rps: [2, 500], arrival: gamma, burstiness: 0.5}\n  duration_s: 30\n  warmup_s: 5\n",
)


def test_each_rate_is_a_stage_with_the_full_rate_for_every_provider_and_region() -> None:
    scenario = parse_scenario(OPEN.replace("regions: [local]", "regions: [eu, us]"))
    stages = plan_run("r", scenario, max_rps_per_shard=200)
    assert [s.rate for s in stages] == [2, 500]
    low = stages[0].shards
    assert len(low) == 4  # 2 providers x 2 regions, one part each
    for shard in low:
        assert shard.rate is not None
        assert (shard.rate.rps, shard.rate.arrival, shard.rate.burstiness) == (2, "gamma", 0.5)
        assert (shard.rate.part, shard.rate.parts) == (0, 1)
        assert (shard.duration_s, shard.warmup_s, shard.concurrency) == (30, 5, 0)


def test_a_high_rate_is_dealt_round_robin_to_parts() -> None:
    scenario = parse_scenario(
        OPEN.replace("duration_s: 30", "requests_per_level: 1001").replace("  warmup_s: 5\n", "")
    )
    stage = plan_run("r", scenario, max_rps_per_shard=200)[1]
    parts = [s for s in stage.shards if s.provider.name == "sim-fast"]
    assert [(p.rate.part, p.rate.parts) for p in parts if p.rate] == [(0, 3), (1, 3), (2, 3)]
    assert [p.seq_start for p in parts] == [0, 1, 2]
    # seqs part, part + 3, ... below 1001: 334 + 334 + 333
    assert [p.requests for p in parts] == [334, 334, 333]
    assert all(p.rate and p.rate.rps == 500 for p in parts)  # the stage's rate, not a share


def test_a_max_in_flight_cap_is_split_across_parts() -> None:
    scenario = parse_scenario(
        OPEN.replace("burstiness: 0.5}", "burstiness: 0.5, max_in_flight: 1000}")
    )
    stage = plan_run("r", scenario, max_streams_per_shard=300, max_rps_per_shard=200)[0]
    parts = [s for s in stage.shards if s.provider.name == "sim-fast"]
    assert [p.rate.max_in_flight for p in parts if p.rate] == [250, 250, 250, 250]
    assert [p.concurrency for p in parts] == [250, 250, 250, 250]
    assert stage.concurrency == 1000


def test_closed_loop_shards_carry_the_stage_window() -> None:
    scenario = parse_scenario(
        VALID_SCENARIO.replace("requests_per_level: 50", "duration_s: 60\n  cooldown_s: 10")
    )
    shard = plan_run("r", scenario)[0].shards[0]
    assert shard.rate is None and shard.cooldown_s == 10 and shard.duration_s == 60


def split_scenario() -> Scenario:
    """Two providers at one level of 1000 virtual users, 3001 requests."""
    return parse_scenario(
        VALID_SCENARIO.replace("concurrency: [1, 8]", "concurrency: [1000]").replace(
            "requests_per_level: 50", "requests_per_level: 3001"
        )
    )


def test_a_stored_plan_survives_a_restart_with_changed_max_streams_per_shard(
    tmp_path: Path,
) -> None:
    con = connect(tmp_path / "plan.duckdb")
    created = RunCoordinator.create("r", split_scenario(), RunStore(con), 300)
    planned = [s.shard_id for s in created.stages[0].shards]
    assert len(planned) == 8  # 4 parts of 250 × 2 providers
    # Restarted with another setting, which would split the level into 2 parts: the run
    # goes on with the plan it was created with.
    resumed = RunCoordinator.resume("r", RunStore(con), 512)
    assert [s.shard_id for s in resumed.stages[0].shards] == planned
    assert [s.model_dump() for s in resumed.stages[0].shards] == [
        s.model_dump() for s in created.stages[0].shards
    ]
    assert (resumed.stages[0].concurrency, resumed.stages[0].rate) == (1000, None)
    view = stored_view(con, "r", 512)
    (stage,) = view.stages
    assert stage.concurrency == 1000
    assert [s.shard_id for s in stage.shards] == planned  # in plan order, as live
    assert view.requests_planned == 2 * 3001


def test_a_run_stored_without_a_plan_is_re_planned_with_the_settings_in_force(
    tmp_path: Path,
) -> None:
    con = connect(tmp_path / "old.duckdb")
    RunCoordinator.create("r", split_scenario(), RunStore(con), 512)
    con.execute("UPDATE shards SET spec = NULL, plan_position = NULL")  # as before v7
    resumed = RunCoordinator.resume("r", RunStore(con), 512)
    assert len(resumed.shards) == 4  # 2 parts of 500 × 2 providers
    assert len(stored_view(con, "r", 512).stages[0].shards) == 4


def test_stored_stages_keep_an_open_loops_rate_and_cap() -> None:
    scenario = parse_scenario(VALID_SCENARIO).model_copy(deep=True)
    data = scenario.model_dump()
    data["load"] = {"rate": {"rps": [500], "max_in_flight": 1000}, "requests_per_level": 5000}
    (planned,) = plan_run("r", Scenario.model_validate(data))
    (stored,) = stored_stages([(planned.concurrency, s) for s in planned.shards])
    assert (stored.index, stored.concurrency, stored.rate) == (0, 1000, 500)
    assert stored.shards == planned.shards


def levels(concurrency: str, regions: str = "[local]", requests: int = 1000) -> Scenario:
    return parse_scenario(
        VALID_SCENARIO.replace("concurrency: [1, 8]", f"concurrency: {concurrency}")
        .replace("requests_per_level: 50", f"requests_per_level: {requests}")
        .replace("regions: [local]", f"regions: {regions}")
    )


def test_a_stage_is_split_over_the_live_worker_processes_of_its_region() -> None:
    stages = plan_run("r", levels("[8, 256]", "[eu, us]"), workers={"eu": 4, "us": 1})
    low, high = ([s for s in st.shards if s.provider.name == "sim-fast"] for st in stages)
    # 8 streams: not worth a part each (under 64 streams a part); one shard per region.
    assert [(s.region, s.concurrency) for s in low] == [("eu", 8), ("us", 8)]
    # 256 streams: 4 parts of 64 in eu (its 4 processes), the whole level in us.
    assert [(s.region, s.concurrency) for s in high] == [("eu", 64)] * 4 + [("us", 256)]
    eu = [s for s in high if s.region == "eu"]
    seqs = sorted(seq for s in eu for seq in range(s.seq_start, s.seq_start + (s.requests or 0)))
    assert seqs == list(range(1000))  # every request of the stage once
    assert stages[1].concurrency == 256  # the stage's level, not a part's share


def test_parts_keep_at_least_64_streams_whatever_the_processes() -> None:
    (stage,) = plan_run("r", levels("[200]"), workers={"local": 8})
    parts = [s.concurrency for s in stage.shards if s.provider.name == "sim-fast"]
    assert parts == [67, 67, 66]  # 3 parts, not 8 of 25


def test_an_open_loop_is_split_over_processes_in_parts_of_at_least_25_rps() -> None:
    scenario = parse_scenario(OPEN)  # rates 2 and 500 req/s
    low, high = plan_run("r", scenario, workers={"local": 2})
    assert len([s for s in low.shards if s.provider.name == "sim-fast"]) == 1
    parts = [s for s in high.shards if s.provider.name == "sim-fast"]
    # 500 req/s is 3 parts of at most 200 req/s already; two processes add none.
    assert [(p.rate.part, p.rate.parts, p.rate.rps) for p in parts if p.rate] == [
        (0, 3, 500), (1, 3, 500), (2, 3, 500)
    ]  # fmt: skip
    (mid,) = plan_run(
        "r", parse_scenario(OPEN.replace("rps: [2, 500]", "rps: [60]")), workers={"local": 4}
    )
    assert [s.rate.parts for s in mid.shards if s.rate and s.provider.name == "sim-fast"] == [2, 2]


def test_a_created_run_stores_the_split_and_the_stage_level(tmp_path: Path) -> None:
    con = connect(tmp_path / "split.duckdb")
    created = RunCoordinator.create("r", levels("[128]"), RunStore(con), 512, {"local": 2})
    assert len(created.shards) == 4  # 2 parts × 2 providers
    rows = con.execute(
        "SELECT DISTINCT concurrency, stage_concurrency FROM shards WHERE run_id = 'r'"
    ).fetchall()
    assert rows == [(64, 128)]
    resumed = RunCoordinator.resume("r", RunStore(con), 512)
    assert sorted(resumed.shards) == sorted(created.shards)


def test_a_session_stage_is_split_into_disjoint_ranges_of_whole_sessions() -> None:
    scenario = parse_scenario(
        VALID_SCENARIO.replace("concurrency: [1, 8]", "concurrency: [1000]")
        .replace("requests_per_level: 50", "sessions_per_level: 901")
        .replace("\nload:", "\n  sessions: {turns: 4}\nload:")
    )
    assert scenario.workload.sessions is not None
    (stage,) = plan_run("r", scenario, max_streams_per_shard=300)
    parts = [s for s in stage.shards if s.provider.name == "sim-fast"]
    assert len(parts) == 4
    ranges = [range(p.seq_start, p.seq_start + (p.requests or 0)) for p in parts]
    assert sorted(session for r in ranges for session in r) == list(range(901))


def test_one_part_scrapes_a_server_but_every_simulated_part_its_own() -> None:
    scenario = parse_scenario(
        VALID_SCENARIO.replace("concurrency: [1, 8]", "concurrency: [600]")
        .replace("requests_per_level: 50", "requests_per_level: 600")
        .replace("api_key_env: MY_KEY", "api_key_env: MY_KEY\n    metrics_url: http://h/metrics")
        .replace("simulate: {ttft_ms: 100, itl_ms: 10}", "simulate: {ttft_ms: 100, itl_ms: 10}\n"
                 "    metrics_url: /metrics")
    )  # fmt: skip
    (stage,) = plan_run("r", scenario, max_streams_per_shard=200)
    marked = {(s.provider.name, s.shard_id): s.scrape_metrics for s in stage.shards}
    assert [v for (name, _), v in sorted(marked.items()) if name == "my-vllm"] == [
        True,
        False,
        False,
    ]
    assert all(v for (name, _), v in marked.items() if name == "sim-fast")
    plain = parse_scenario(VALID_SCENARIO)
    assert not any(scrapes_metrics(p, 0) for p in plain.providers)


def test_one_part_resets_a_servers_cache_but_every_simulated_part_its_own() -> None:
    scenario = parse_scenario(
        VALID_SCENARIO.replace("concurrency: [1, 8]", "concurrency: [600]")
        .replace("requests_per_level: 50", "requests_per_level: 600")
        .replace("api_key_env: MY_KEY", "api_key_env: MY_KEY\n    cache_reset: vllm")
        .replace("simulate: {ttft_ms: 100, itl_ms: 10}", "simulate: {ttft_ms: 100, itl_ms: 10}\n"
                 "    cache_reset: vllm")
    )  # fmt: skip
    (stage,) = plan_run("r", scenario, max_streams_per_shard=200)
    marked = {(s.provider.name, s.shard_id): s.reset_cache for s in stage.shards}
    assert [v for (name, _), v in sorted(marked.items()) if name == "my-vllm"] == [
        True,
        False,
        False,
    ]
    assert all(v for (name, _), v in marked.items() if name == "sim-fast")
    plain = parse_scenario(VALID_SCENARIO)
    assert not any(resets_cache(p, 0) for p in plain.providers)


# --------------------------------------------------------------------------- bounded shards


def closed(concurrency: str, requests: str) -> Scenario:
    return parse_scenario(
        VALID_SCENARIO.replace("concurrency: [1, 8]", f"concurrency: {concurrency}").replace(
            "requests_per_level: 50", requests
        )
    )


def test_the_hostile_level_is_one_small_shard_not_two_huge_ones() -> None:
    """concurrency 100000 with 2 requests was two shards of 50,000 streams (each
    pre-warming 50,000 connections); the two requests need two streams."""
    (stage,) = plan_run("r", closed("[100000]", "requests_per_level: 2"))
    sim = [s for s in stage.shards if s.provider.name == "sim-fast"]
    assert [(s.concurrency, s.requests) for s in sim] == [(2, 2)]
    assert stage.concurrency == 100_000  # the report still shows the level asked for


def test_every_shard_of_a_large_closed_level_is_within_the_stream_bound() -> None:
    for concurrency, requests in [(3000, 10), (3000, 5000), (100_000, 1_000_000), (513, 513)]:
        (stage,) = plan_run("r", closed(f"[{concurrency}]", f"requests_per_level: {requests}"))
        sim = [s for s in stage.shards if s.provider.name == "sim-fast"]
        assert max(s.concurrency for s in sim) <= 512
        assert sum(s.concurrency for s in sim) == min(concurrency, requests)
        assert sum(s.requests or 0 for s in sim) == requests


def test_an_open_loop_cap_is_never_above_its_requests() -> None:
    data = OPEN.replace("duration_s: 30", "requests_per_level: 3").replace("  warmup_s: 5\n", "")
    data = data.replace("burstiness: 0.5}", "burstiness: 0.5, max_in_flight: 100000}")
    stage = plan_run("r", parse_scenario(data))[1]
    caps = [s.rate.max_in_flight for s in stage.shards if s.rate is not None]
    assert caps and all(cap is not None and cap <= 3 for cap in caps)


def test_a_level_too_large_to_split_is_refused_at_its_field() -> None:
    """With a small per-shard bound, 100,000 streams bounded by duration need more
    shards than a run may have: refused naming the level, not planned as huge shards."""
    scenario = closed("[8, 100000]", "duration_s: 60")
    with pytest.raises(ScenarioError) as caught:
        plan_run("r", scenario, max_streams_per_shard=8)
    (problem,) = caught.value.problems
    assert problem.path == "load.concurrency.1"
    assert "at most 8 streams" in problem.message
    assert str(MAX_SHARDS_PER_RUN) in problem.message


def test_planned_shards_are_the_plans_rows_with_their_stages_level() -> None:
    stages = plan_run("r", closed("[1, 1000]", "requests_per_level: 2000"))
    rows = planned_shards(stages)
    assert [(r.shard_id, r.spec) for r in rows] == [
        (s.shard_id, s) for stage in stages for s in stage.shards
    ]
    assert {r.stage: r.stage_concurrency for r in rows} == {0: 1, 1: 1000}
    assert max(r.concurrency for r in rows if r.stage == 1) <= 512  # a part's share


def test_each_region_of_a_level_gets_its_own_number_of_parts() -> None:
    base = closed("[256]", "requests_per_level: 1000")
    scenario = base.model_copy(update={"regions": ["eu", "us"]})
    (stage,) = plan_run("r", scenario, workers={"eu": 4, "us": 1})
    first = scenario.providers[0].name
    mine = [s for s in stage.shards if s.provider.name == first]
    assert {r: len([s for s in mine if s.region == r]) for r in ("eu", "us")} == {"eu": 4, "us": 1}
    assert sum(s.requests or 0 for s in mine if s.region == "eu") == 1000
