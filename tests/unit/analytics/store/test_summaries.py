"""Per-shard pre-aggregates: stored when a shard settles, complete or not, backfilled, and
giving a large run's report the exact report's figures (percentiles within the
histograms' relative error)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pytest

from analytics.report.build import build_report
from analytics.report.stored import ExactLimits
from analytics.stats.sketch import RELATIVE_ERROR
from analytics.store.db import connect
from analytics.store.summaries import backfill_summaries, store_shard_summary, summaries_complete
from tests.support.analytics_builders import MS, S, failed_result, ok_result, scenario, store_run
from workers.client.errors import ErrorClass

# Every run counts as large: the report reads the pre-aggregates whenever they are complete.
ALWAYS_STORED = ExactLimits(ok_requests=0, itl_gaps=0)
FIGURES = ("requests", "ok", "errors", "request_rate", "output_tok_s", "ttft_n", "itl_n")
PERCENTILES = ("ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "tpot_p50_ms", "e2e_p90_ms")


@pytest.fixture
def con(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    rng = np.random.default_rng(21)
    shards = {
        (provider, stage, "local"): [
            ok_result(
                10 * S + i * 30 * MS,
                float(rng.lognormal(4.0 + stage, 0.3)),
                rng.uniform(2.0, 9.0, size=5).tolist(),
            )
            for i in range(1100)
        ]
        + [failed_result(11 * S + i * MS, ErrorClass.TIMEOUT) for i in range(7)]
        for provider in ("a", "b")
        for stage in (0, 1)
    }
    con = connect(tmp_path / "sum.duckdb")
    spec = scenario([{"name": "a", "kind": "simulated"}, {"name": "b", "kind": "simulated"}])
    store_run(con, "run", spec, shards)  # each shard settles: its aggregates are stored
    return con


def test_settled_shards_have_their_aggregates(con: duckdb.DuckDBPyConnection) -> None:
    assert summaries_complete(con, "run")
    con.execute("DELETE FROM shard_summaries WHERE shard_id = 's1.b.local'")
    assert not summaries_complete(con, "run")
    # Without them the report falls back to the raw records.
    assert build_report(con, "run", exact_limits=ALWAYS_STORED, plots=False).percentiles == {
        "method": "exact"
    }
    store_shard_summary(con, "run", "s1.b.local")
    assert summaries_complete(con, "run")


def test_backfill_stores_every_accepted_shard_again(con: duckdb.DuckDBPyConnection) -> None:
    for table in ("shard_summaries", "shard_errors", "shard_histograms"):
        con.execute(f"DELETE FROM {table}")
    assert not summaries_complete(con, "run")
    assert backfill_summaries(con) == 4
    assert summaries_complete(con, "run")


def test_a_report_from_aggregates_matches_the_exact_one(con: duckdb.DuckDBPyConnection) -> None:
    exact = build_report(con, "run", plots=False)
    store_shard_summary(con, "run", "s0.a.local")  # storing again replaces, never adds
    stored = build_report(con, "run", exact_limits=ALWAYS_STORED, plots=False)
    assert exact.percentiles["method"] == "exact"
    assert stored.percentiles["method"] != "exact"
    assert len(stored.stages) == len(exact.stages) == 4
    for row_exact, row_stored in zip(exact.stages, stored.stages, strict=True):
        for column in FIGURES:
            assert row_stored[column] == pytest.approx(row_exact[column]), column
        assert row_stored["errors_by_class"] == row_exact["errors_by_class"] == "timeout=7"
        for column in PERCENTILES:
            assert row_stored[column] == pytest.approx(
                row_exact[column], rel=RELATIVE_ERROR * 1.001
            ), column
