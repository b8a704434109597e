"""Client-bound flags and roofline efficiency in the report's stage rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analytics.client_health import stage_health, with_client_health
from analytics.db import connect
from analytics.roofline_view import with_roofline
from scenarios.catalog import default_catalog
from scenarios.roofline import decode_ceiling, memory_fit, resolve_deployment


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


def test_efficiency_is_measured_decode_over_the_roofline_at_the_observed_batch() -> None:
    providers = [
        {
            "provider": "h100",
            "deployment_model": "llama-3.1-405b",
            "hardware": "h100",
            "gpus": 8,
            "quantization": "fp8",
        },
        {"provider": "api"},
    ]
    stage = {
        "ok": 10,
        "input_tokens": 10_000,
        "output_tokens": 2_000,
        "achieved_concurrency": 8.0,
        "decode_tok_s_p50": 30.0,
        "output_tok_s": 200.0,
    }
    rows = with_roofline([{**stage, "provider": "h100"}, {**stage, "provider": "api"}], providers)
    deployment = resolve_deployment(
        default_catalog(), model="llama-3.1-405b", quant="fp8", hardware="h100", gpus=8
    )
    kv_tokens = 1000 + 200 / 2  # mean prompt + half the mean answer
    ceiling = decode_ceiling(deployment, 8.0, kv_tokens)
    assert memory_fit(deployment, round(kv_tokens)).max_sequences > 8
    assert rows[0]["roofline_per_stream_tok_s"] == pytest.approx(ceiling.per_stream_tok_s)
    assert rows[0]["efficiency_pct"] == pytest.approx(100 * 30.0 / ceiling.per_stream_tok_s)
    assert rows[0]["aggregate_efficiency_pct"] == pytest.approx(
        100 * 200.0 / ceiling.aggregate_tok_s
    )
    assert rows[1]["efficiency_pct"] is None


def test_prompt_realism_is_the_mean_relative_error_of_reported_prompt_lengths(
    tmp_path: Path,
) -> None:
    from analytics.ingest import BatchMessage, ingest_batches
    from analytics.prompt_realism import with_prompt_realism
    from analytics.runs import PlannedShard, RunStore
    from scenarios.loader import parse_scenario
    from scenarios.records import batch_to_ipc, records_to_batch
    from tests.unit.test_metrics import CTX, result
    from tests.unit.test_scenario_schema import VALID
    from workers.prompts import PlannedRequest
    from workers.rows import record_row

    con = connect(tmp_path / "p.duckdb")
    RunStore(con).create_run(
        "run", parse_scenario(VALID), [PlannedShard("s0.a.local", 0, "a", "local", 4, 2)]
    )
    # The server reported 10 prompt tokens for both; we planned 8 and 10: errors +25 % and 0 %.
    rows = [
        record_row(CTX, PlannedRequest(i, planned, 5, "p"), result(i, 50, [5]))
        for i, planned in enumerate((8, 10))
    ]
    ingest_batches(
        con, [BatchMessage("run", "s0.a.local", 1, 0, batch_to_ipc(records_to_batch(rows)))]
    )
    RunStore(con).shard_done("run", "s0.a.local", "finished", 1, None)
    (row,) = with_prompt_realism(con, "run", [{"provider": "a", "stage": 0, "region": "local"}])
    assert row["prompt_tokens_planned_mean"] == pytest.approx(9.0)
    assert row["prompt_tokens_reported_mean"] == pytest.approx(10.0)
    assert row["prompt_length_error_pct"] == pytest.approx(12.5)
