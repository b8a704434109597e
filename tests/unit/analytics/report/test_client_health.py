"""Client-bound flags in the report's stage rows, from each shard's accepted attempt."""

from __future__ import annotations

import json
from pathlib import Path

from analytics.report.client_health import stage_health, with_client_health
from analytics.store.db import connect


def test_a_stage_is_judged_on_its_shards_combined_figures(tmp_path: Path) -> None:
    con = connect(tmp_path / "h.duckdb")
    con.execute(
        "INSERT INTO shards (run_id, shard_id, stage, provider, region, concurrency, state, "
        "accepted_attempt) VALUES ('r', 'a', 0, 'p', 'eu', 8, 'finished', 1), "
        "('r', 'b', 0, 'p', 'eu', 8, 'finished', 2), ('r', 'c', 1, 'p', 'eu', 8, 'finished', 1)"
    )
    healthy = {
        "load_kind": "closed", "loop_lag_p99_ms": "1.5", "loop_cpu_util": "0.3",
        "schedule_lag_p99_ms": "0.4", "send_lag_p99_ms": "0.4", "send_lag_share": "0.001",
        "requests_sent": "100", "token_events": "6400", "first_tokens": "100",
        "merged_tokens": "0", "kernel_stamps": "1",
    }  # fmt: skip
    # Busy (loop lag and CPU) but no stamp merged: no reason on its own.
    busy = {**healthy, "loop_lag_p99_ms": "150", "loop_cpu_util": "0.97"}
    merging = {**healthy, "merged_tokens": "200", "merge_error_p99_ms": "44.4"}
    for shard, attempt, health in (
        ("a", 1, busy),
        ("b", 1, merging),  # a superseded attempt: not judged
        ("b", 2, merging),
        ("c", 1, busy),
    ):
        con.execute(
            "INSERT INTO shard_attempts (run_id, shard_id, attempt, state, health) VALUES ('r', ?, ?, 'finished', ?)",
            [shard, attempt, json.dumps(health)],
        )
    health = stage_health(con, "r")
    stage0 = health[("p", 0, "eu")]
    # 200 of 12,800 stamps merged (1.6 %): the stage is flagged, and the note says by how much.
    assert stage0["client_bound"] is True
    assert stage0["client_bound_reasons"] == ["read_lag"]
    assert stage0["token_events"] == 12_800 and stage0["loop_lag_p99_ms"] == 150.0
    assert "1.6% of token stamps" in stage0["client_bound_note"]
    assert "ITL p99 off by up to 44 ms" in stage0["client_bound_note"]
    assert health[("p", 1, "eu")]["client_bound"] is False
    assert health[("p", 1, "eu")]["client_bound_note"] == ""
    rows = with_client_health(
        [
            {"provider": "p", "stage": 1, "region": "eu"},
            {"provider": "q", "stage": 0, "region": "eu"},
        ],
        health,
    )
    assert [r["client_bound"] for r in rows] == [False, False]
    assert rows[1]["client_health"] is None


def test_prewarm_and_gc_figures_reach_the_stage_summed_or_at_their_worst(tmp_path: Path) -> None:
    con = connect(tmp_path / "w.duckdb")
    con.execute(
        "INSERT INTO shards (run_id, shard_id, stage, provider, region, concurrency, state, "
        "accepted_attempt) VALUES ('r', 'a', 0, 'p', 'eu', 512, 'finished', 1), "
        "('r', 'b', 0, 'p', 'eu', 488, 'finished', 1), ('r', 'c', 1, 'p', 'eu', 8, 'finished', 1)"
    )
    base = {"load_kind": "closed", "requests_sent": "10", "kernel_stamps": "1"}
    shards = {
        "a": {**base, "prewarmed_connections": "512", "prewarm_ms": "310.5",
              "gc_collections": "2", "gc_pause_total_ms": "3.5", "gc_pause_max_ms": "2.5"},
        "b": {**base, "prewarmed_connections": "488", "prewarm_ms": "290.0",
              "gc_collections": "1", "gc_pause_total_ms": "1.0", "gc_pause_max_ms": "1.0"},
        "c": base,  # a shard from before these figures existed
    }  # fmt: skip
    for shard, health in shards.items():
        con.execute(
            "INSERT INTO shard_attempts (run_id, shard_id, attempt, state, health) "
            "VALUES ('r', ?, 1, 'finished', ?)",
            [shard, json.dumps(health)],
        )
    health = stage_health(con, "r")
    stage0 = health[("p", 0, "eu")]
    assert stage0["prewarmed_connections"] == 1000 and stage0["prewarm_ms"] == 310.5
    assert stage0["gc_collections"] == 3 and stage0["gc_pause_total_ms"] == 4.5
    assert stage0["gc_pause_max_ms"] == 2.5
    assert "prewarmed_connections" not in health[("p", 1, "eu")]
