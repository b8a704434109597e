"""Metric arithmetic: the SQL derived metrics against numpy and the definitions in docs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analytics.report.build import build_report
from analytics.store.db import connect, load_sql
from analytics.store.ingest import BatchMessage, ingest_batches
from analytics.store.runs import PlannedShard, RunStore
from scenarios.loader import parse_scenario
from scenarios.wire.records import batch_to_ipc, records_to_batch
from tests.support.builders import MS, ROW_CONTEXT, VALID_SCENARIO, timed_result
from workers.client.errors import ErrorClass, RequestFailure
from workers.client.result import RequestResult
from workers.prompts.plan import PlannedRequest
from workers.shard.rows import record_row


@pytest.fixture
def filled_db(tmp_path: Path) -> tuple[object, list[RequestResult]]:
    con = connect(tmp_path / "m.duckdb")
    RunStore(con).create_run(
        "run", parse_scenario(VALID_SCENARIO), [PlannedShard("s0.a.local", 0, "a", "local", 4, 50)]
    )
    rng = np.random.default_rng(3)
    results = [
        timed_result(
            i * 1000 * MS,
            float(rng.lognormal(4.6, 0.3)),
            list(rng.uniform(8, 14, size=int(rng.integers(1, 30)))),
        )
        for i in range(50)
    ]
    results.append(
        RequestResult(
            intended_start=0, sent=1, end=2, failure=RequestFailure(ErrorClass.TIMEOUT, "t")
        )
    )
    rows = [
        record_row(ROW_CONTEXT, PlannedRequest(i, 10, 5, "p"), r) for i, r in enumerate(results)
    ]
    ingest_batches(
        con, [BatchMessage("run", "s0.a.local", 1, 0, batch_to_ipc(records_to_batch(rows)))]
    )
    RunStore(con).shard_done("run", "s0.a.local", "finished", 1, None)
    return con, results


def test_sql_percentiles_match_numpy(filled_db: tuple[object, list[RequestResult]]) -> None:
    con, results = filled_db
    ok = [r for r in results if r.ok]
    report = build_report(con, "run")  # type: ignore[arg-type]
    (row,) = report.stages
    assert (row["requests"], row["ok"], row["errors"], row["errors_by_class"]) == (
        51,
        50,
        1,
        "timeout=1",
    )
    ttft = np.array([(r.first_token - r.sent) / MS for r in ok])  # type: ignore[operator]
    gaps = np.array([g / MS for r in ok for g in r.itl_gaps()])
    tpot = np.array(
        [
            (r.last_token - r.first_token) / MS / (r.completion_tokens - 1)
            for r in ok
            if r.completion_tokens > 1
        ]
    )  # type: ignore[operator]
    assert row["ttft_p50_ms"] == pytest.approx(np.percentile(ttft, 50))
    assert row["ttft_p95_ms"] == pytest.approx(np.percentile(ttft, 95))
    assert row["ttft_p99_ms"] == pytest.approx(np.percentile(ttft, 99))
    assert row["itl_p50_ms"] == pytest.approx(np.percentile(gaps, 50))
    assert row["itl_p99_ms"] == pytest.approx(np.percentile(gaps, 99))
    assert row["tpot_p50_ms"] == pytest.approx(np.percentile(tpot, 50))
    e2e = np.array([(r.end - r.sent) / MS for r in ok])  # type: ignore[operator]
    # Means and standard deviations over the same samples, population std as numpy's
    # default (ddof=0, what vLLM's benchmark reports): docs/metrics.md.
    for metric, values in (("ttft", ttft), ("itl", gaps), ("tpot", tpot), ("e2e", e2e)):
        assert row[f"{metric}_mean_ms"] == pytest.approx(np.mean(values)), metric
        assert row[f"{metric}_std_ms"] == pytest.approx(np.std(values)), metric
        assert row[f"{metric}_std_ms"] != pytest.approx(np.std(values, ddof=1)), metric


def test_tpot_follows_the_definition_in_docs_metrics(
    filled_db: tuple[object, list[RequestResult]],
) -> None:
    con, _ = filled_db
    rows = con.execute(
        "SELECT last_token_ns, ttft_ns, completion_tokens, tpot_ms, decode_tok_s FROM requests WHERE status = 'ok' AND completion_tokens > 1"
    ).fetchall()  # type: ignore[attr-defined]
    for last, first, tokens, tpot, speed in rows:
        assert tpot == pytest.approx((last - first) / 1e6 / (tokens - 1))
        assert speed == pytest.approx((tokens - 1) / ((last - first) / 1e9))


def test_report_sql_is_shipped() -> None:
    assert "FROM stage_summary" in load_sql("stage_summary")
    assert "quantile_cont" in load_sql("views/40_stage_summary_measured")
