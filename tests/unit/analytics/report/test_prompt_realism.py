"""Prompt realism: how far the server's prompt lengths are from the planned ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics.report.prompt_realism import with_prompt_realism
from analytics.store.db import connect
from analytics.store.ingest import BatchMessage, ingest_batches
from analytics.store.runs import PlannedShard, RunStore
from scenarios.loader import parse_scenario
from scenarios.wire.records import batch_to_ipc, records_to_batch
from tests.support.builders import ROW_CONTEXT, VALID_SCENARIO, timed_result
from workers.prompts.plan import PlannedRequest
from workers.shard.rows import record_row


def test_prompt_realism_is_the_mean_relative_error_of_reported_prompt_lengths(
    tmp_path: Path,
) -> None:
    con = connect(tmp_path / "p.duckdb")
    RunStore(con).create_run(
        "run", parse_scenario(VALID_SCENARIO), [PlannedShard("s0.a.local", 0, "a", "local", 4, 2)]
    )
    # The server reported 10 prompt tokens for both; we planned 8 and 10: errors +25 % and 0 %.
    rows = [
        record_row(ROW_CONTEXT, PlannedRequest(i, planned, 5, "p"), timed_result(i, 50, [5]))
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


def test_warm_up_requests_are_reported_apart_with_the_calibration_used(tmp_path: Path) -> None:
    con = connect(tmp_path / "p.duckdb")
    RunStore(con).create_run(
        "run", parse_scenario(VALID_SCENARIO), [PlannedShard("s0.a.local", 0, "a", "local", 4, 2)]
    )
    # Reported 10 each time (timed_result's usage): two warm-up requests planned as one
    # word a token (8: +25 %), two calibrated ones planned right (10: 0 %).
    requests = [
        PlannedRequest(0, 8, 5, "p", prompt_source="warmup"),
        PlannedRequest(1, 8, 5, "p", prompt_source="warmup"),
        PlannedRequest(2, 10, 5, "p", prompt_source="calibrated", tokens_per_word=1.25),
        PlannedRequest(3, 10, 5, "p", prompt_source="calibrated", tokens_per_word=1.35),
    ]
    rows = [record_row(ROW_CONTEXT, r, timed_result(r.seq, 50, [5])) for r in requests]
    ingest_batches(
        con, [BatchMessage("run", "s0.a.local", 1, 0, batch_to_ipc(records_to_batch(rows)))]
    )
    RunStore(con).shard_done("run", "s0.a.local", "finished", 1, None)
    (row,) = with_prompt_realism(con, "run", [{"provider": "a", "stage": 0, "region": "local"}])
    assert row["prompt_length_error_pct"] == pytest.approx(0.0)
    assert row["prompt_length_warmup_error_pct"] == pytest.approx(25.0)
    assert row["prompt_warmup_requests"] == 2
    assert row["prompt_length_source"] == "calibrated"
    assert row["prompt_tokens_per_word"] == pytest.approx(1.3)
    assert row["prompt_tokens_planned_mean"] == pytest.approx(10.0)
