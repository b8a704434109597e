"""Client-bound flags in the report's stage rows, from each shard's accepted attempt."""

from __future__ import annotations

import json
from pathlib import Path

from analytics.client_health import stage_health, with_client_health
from analytics.db import connect


def test_a_shard_crossing_a_threshold_flags_its_stage(tmp_path: Path) -> None:
    con = connect(tmp_path / "h.duckdb")
    con.execute(
        "INSERT INTO shards (run_id, shard_id, stage, provider, region, concurrency, state, "
        "accepted_attempt) VALUES ('r', 'a', 0, 'p', 'eu', 8, 'finished', 1), "
        "('r', 'b', 0, 'p', 'eu', 8, 'finished', 2), ('r', 'c', 1, 'p', 'eu', 8, 'finished', 1)"
    )
    healthy = {"loop_lag_p99_ms": "1.5", "loop_cpu_util": "0.3", "schedule_lag_p99_ms": "0.4"}
    saturated = {**healthy, "loop_lag_p99_ms": "42", "loop_cpu_util": "0.97"}
    for shard, attempt, health in (
        ("a", 1, healthy),
        ("b", 1, healthy),
        ("b", 2, saturated),
        ("c", 1, healthy),
    ):
        con.execute(
            "INSERT INTO shard_attempts (run_id, shard_id, attempt, state, health) VALUES ('r', ?, ?, 'finished', ?)",
            [shard, attempt, json.dumps(health)],
        )
    health = stage_health(con, "r")
    assert health[("p", 0, "eu")]["client_bound"] is True
    assert health[("p", 0, "eu")]["client_bound_reasons"] == ["loop_cpu", "loop_lag"]
    assert health[("p", 0, "eu")]["loop_lag_p99_ms"] == 42.0
    assert health[("p", 1, "eu")]["client_bound"] is False
    rows = with_client_health(
        [
            {"provider": "p", "stage": 1, "region": "eu"},
            {"provider": "q", "stage": 0, "region": "eu"},
        ],
        health,
    )
    assert [r["client_bound"] for r in rows] == [False, False]
    assert rows[1]["client_health"] is None
