"""The report against numpy and hand arithmetic: percentiles, intervals, rates, cost, SLOs."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pytest

from analytics.report.build import RunReport, UnknownProviderError, build_report
from analytics.store.db import connect
from analytics.store.ingest import BatchMessage, ingest_batches
from analytics.store.runs import PlannedShard, RunStore
from scenarios.model import Scenario
from scenarios.wire.records import batch_to_ipc, records_to_batch
from tests.support.builders import (
    MS,
    REPORT_SCENARIO,
    S,
    evenly_paced,
    failed_result,
    ok_result,
    store_run,
)
from workers.client.errors import ErrorClass
from workers.client.result import RequestResult
from workers.prompts.plan import PlannedRequest
from workers.shard.rows import RowContext, record_row


@pytest.fixture
def lognormal_run(tmp_path: Path) -> tuple[duckdb.DuckDBPyConnection, list[RequestResult]]:
    """1,200 requests of 'api' with lognormal TTFT and uniform gaps, plus 30 failures."""
    rng = np.random.default_rng(7)
    results = [
        ok_result(
            10 * S + i * 50 * MS,
            float(rng.lognormal(4.6, 0.5)),
            list(rng.uniform(5, 15, size=int(rng.integers(1, 12)))),
        )
        for i in range(1200)
    ]
    results += [failed_result(10 * S + i * MS, ErrorClass.HTTP_429) for i in range(20)]
    results += [failed_result(11 * S + i * MS, ErrorClass.TIMEOUT) for i in range(10)]
    con = connect(tmp_path / "r.duckdb")
    store_run(con, "run", REPORT_SCENARIO, {("api", 0): results})
    return con, results


def test_every_printed_percentile_matches_numpy(
    lognormal_run: tuple[duckdb.DuckDBPyConnection, list[RequestResult]],
) -> None:
    con, results = lognormal_run
    (row,) = build_report(con, "run").stages
    ok = [r for r in results if r.ok]
    assert (row["requests"], row["ok"], row["errors"]) == (1230, 1200, 30)
    assert row["errors_by_class"] == "http_429=20, timeout=10"
    assert row["error_rate"] == pytest.approx(30 / 1230)
    samples = {
        "ttft": [(r.first_token - r.sent) / MS for r in ok],  # type: ignore[operator]
        "itl": [g / MS for r in ok for g in r.itl_gaps()],
        "tpot": [
            (r.last_token - r.first_token) / MS / (r.completion_tokens - 1)  # type: ignore[operator]
            for r in ok
            if r.completion_tokens > 1  # type: ignore[operator]
        ],
        "e2e": [(r.end - r.sent) / MS for r in ok],  # type: ignore[operator]
    }
    for metric, values in samples.items():
        assert row[f"{metric}_n"] == len(values)
        for label, q in [("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99), ("p999", 99.9)]:
            assert row[f"{metric}_{label}_ms"] == pytest.approx(np.percentile(values, q)), (
                metric,
                label,
            )
    speeds = [1000 / t for t in samples["tpot"]]
    assert row["decode_tok_s_p50"] == pytest.approx(np.percentile(speeds, 50))
    # Closed loop: no intent-based percentiles.
    assert row["ttft_intent_p50_ms"] is None and row["load_kind"] == "closed"


def test_low_sample_rule_flags_unsupported_percentiles(
    lognormal_run: tuple[duckdb.DuckDBPyConnection, list[RequestResult]],
) -> None:
    con, _ = lognormal_run
    (row,) = build_report(con, "run").stages
    # n = 1200: p99 needs 1000 (supported), p99.9 needs 10000 (flagged).
    assert "ttft_p99_ms" not in row["low_sample"]
    assert "ttft_p999_ms" in row["low_sample"]
    assert row["ttft_p99_ci_low_ms"] is not None


def test_bootstrap_interval_is_sane_reproducible_and_matches_a_naive_bootstrap(
    lognormal_run: tuple[duckdb.DuckDBPyConnection, list[RequestResult]],
) -> None:
    con, results = lognormal_run
    (row,) = build_report(con, "run").stages
    (again,) = build_report(con, "run").stages
    ttft = np.array([(r.first_token - r.sent) / MS for r in results if r.ok])  # type: ignore[operator]
    rng = np.random.default_rng(0)
    for label, q in [("p50", 0.5), ("p99", 0.99)]:
        low, high = row[f"ttft_{label}_ci_low_ms"], row[f"ttft_{label}_ci_high_ms"]
        assert low < row[f"ttft_{label}_ms"] < high
        assert (low, high) == (again[f"ttft_{label}_ci_low_ms"], again[f"ttft_{label}_ci_high_ms"])
        naive = np.percentile(
            [np.percentile(rng.choice(ttft, ttft.size), q * 100) for _ in range(2000)], [2.5, 97.5]
        )
        width = naive[1] - naive[0]
        # Same distribution, independent Monte Carlo draws: endpoints agree within noise.
        assert low == pytest.approx(naive[0], abs=0.25 * width)
        assert high == pytest.approx(naive[1], abs=0.25 * width)


def test_rates_throughput_concurrency_and_cost_by_hand(tmp_path: Path) -> None:
    con = connect(tmp_path / "c.duckdb")
    n = 11
    store_run(con, "run", REPORT_SCENARIO, {(p, 0): evenly_paced(n) for p in ("api", "gpu", "own")})
    report = build_report(con, "run")
    rows = {r["provider"]: r for r in report.stages}
    # Steady window = [first send, last send] = 10 s; the 10 requests ending in it carry
    # 100 output and 50 input tokens each; each is in flight for 0.1 + 0.099 + 0.001 s.
    busy = 0.1 + 0.099 + 0.001
    for row in rows.values():
        assert row["steady_window"] is True
        assert row["window_s"] == pytest.approx(10.0)
        assert row["request_rate"] == pytest.approx(1.0)
        assert row["output_tok_s"] == pytest.approx(100.0)
        assert row["input_tok_s"] == pytest.approx(50.0)
        assert row["achieved_concurrency"] == pytest.approx(busy)
    api = rows["api"]
    assert api["cost_basis"] == "api"
    assert (api["cost_per_mtok_input"], api["cost_per_mtok_output"]) == (0.8, 1.2)
    # 11 requests × (50 × 0.8 + 100 × 1.2) / 1e6 = 11 × 160e-6 USD; per 1k: 0.16 USD.
    assert api["cost_usd"] == pytest.approx(11 * 160e-6)
    assert api["cost_per_1k_requests"] == pytest.approx(0.16)
    # h100 from the catalog: 3.125 USD/GPU-h × 8 = 25 USD/h.
    gpu = rows["gpu"]
    assert gpu["cost_basis"] == "gpu_hour" and gpu["deployment_usd_per_hour"] == pytest.approx(25)
    assert gpu["cost_per_mtok_output"] == pytest.approx(25 / (100 * 3600) * 1e6)  # 69.44
    assert gpu["cost_per_mtok_input"] == pytest.approx(25 / (50 * 3600) * 1e6)  # 138.89
    assert gpu["cost_per_1k_requests"] == pytest.approx(25 / 3600 * 1000)  # 6.94
    own = rows["own"]
    assert own["cost_per_mtok_output"] == pytest.approx(4 / (100 * 3600) * 1e6)  # 11.11
    sources = {p["provider"]: p["gpu_hour_source"] for p in report.providers}
    assert sources == {"api": None, "gpu": "catalog", "own": "scenario"}
    # Pareto: all share one p99; the cheapest per output token dominates the others.
    assert [(p["provider"], p["pareto"]) for p in report.pareto] == [
        ("api", True),
        ("own", False),
        ("gpu", False),
    ]


def test_goodput_and_slo_attainment(tmp_path: Path) -> None:
    con = connect(tmp_path / "g.duckdb")
    # 21 requests one per second: 7 miss the TTFT objective (150 ms), 3 fail.
    results = [
        ok_result(10 * S + i * S, 200.0 if i % 3 == 0 else 100.0, [1.0] * 9) for i in range(18)
    ]
    results += [failed_result(28 * S + i * S, ErrorClass.HTTP_5XX) for i in range(3)]
    store_run(con, "run", REPORT_SCENARIO, {("api", 0): results})
    (row,) = build_report(con, "run").stages
    met = sum(1 for i in range(18) if i % 3 != 0)
    assert row["slo_attainment_pct"] == pytest.approx(100 * met / 21)
    # Window [10 s, 30 s]: all but the last failure end inside; 12 of them met the SLO.
    assert row["goodput_rps"] == pytest.approx(met / 20)


def test_open_loop_reports_intent_based_percentiles(tmp_path: Path) -> None:
    con = connect(tmp_path / "o.duckdb")
    results = [ok_result(10 * S + i * S, 100.0 + i, [1.0] * 4) for i in range(30)]
    store_run(con, "run", REPORT_SCENARIO, {("api", 0): results}, load_kind="open")
    (row,) = build_report(con, "run").stages
    lag = 1.0  # ok_result: intended_start = sent - 1 ms
    ttft = [100.0 + i + lag for i in range(30)]
    assert row["ttft_intent_p50_ms"] == pytest.approx(np.percentile(ttft, 50))
    assert row["ttft_intent_p50_ci_low_ms"] is not None


def test_provider_comparison_ratio_interval_and_verdict(tmp_path: Path) -> None:
    con = connect(tmp_path / "p.duckdb")
    rng = np.random.default_rng(1)
    fast = [ok_result(10 * S + i * S, float(rng.lognormal(4.6, 0.3)), [1.0]) for i in range(1500)]
    slow = [
        ok_result(10 * S + i * S, 2 * float(rng.lognormal(4.6, 0.3)), [1.0]) for i in range(1500)
    ]
    store_run(con, "run", REPORT_SCENARIO, {("api", 0): fast, ("gpu", 0): slow})
    report = build_report(con, "run").with_provider_comparison("api", "gpu")
    assert report.comparison is not None
    by_metric = {r["metric"]: r for r in report.comparison["rows"]}
    p99 = by_metric["ttft_p99"]
    assert p99["ratio"] == pytest.approx(p99["b_ms"] / p99["a_ms"])
    assert 1.0 < p99["ci_low"] < p99["ratio"] < p99["ci_high"]
    assert by_metric["ttft_p50"]["ci_low"] > 1.6 and by_metric["ttft_p50"]["ci_high"] < 2.4
    assert by_metric["ttft_p50"]["verdict"].startswith("gpu's p50 TTFT is 2.")
    assert "95 % CI" in p99["verdict"] and "gpu is slower" in p99["verdict"]
    same = build_report(con, "run").with_provider_comparison("api", "api").comparison
    assert same is not None
    assert all(r["verdict"].startswith("no clear difference") for r in same["rows"])
    with pytest.raises(UnknownProviderError, match="it has: api, gpu, own"):
        build_report(con, "run").with_provider_comparison("api", "nope")


def test_run_comparison_matches_stage_provider_region(tmp_path: Path) -> None:
    con = connect(tmp_path / "two.duckdb")
    store_run(con, "yesterday", REPORT_SCENARIO, {("api", 0): evenly_paced(40)})
    today = [ok_result(10 * S + i * S, 150.0, [1.0] * 99) for i in range(40)]
    store_run(con, "today", REPORT_SCENARIO, {("api", 0): today})
    report = build_report(con, "today").with_run_comparison(build_report(con, "yesterday"))
    assert report.comparison is not None and report.comparison["kind"] == "runs"
    ttft = next(r for r in report.comparison["rows"] if r["metric"] == "ttft_p50")
    assert ttft["ratio"] == pytest.approx(1.5)
    assert "api in run today's p50 TTFT is 1.50× api in run yesterday's" in ttft["verdict"]


def test_report_is_json_ready_and_views_are_queryable(
    lognormal_run: tuple[duckdb.DuckDBPyConnection, list[RequestResult]],
) -> None:
    con, _ = lognormal_run
    report: RunReport = build_report(con, "run")
    text = json.dumps(report.to_dict())  # no default=: every value must be native JSON
    assert '"ttft_p99_ci_low_ms"' in text
    assert report.plots["ttft_cdf"][0]["n"] == 1200
    assert sum(report.plots["errors_over_time"]["counts"]["http_429"]) == 20
    for view in ("requests", "token_gaps", "stages", "stage_summary", "provider_comparison",
                 "providers", "regions", "slos"):  # fmt: skip
        con.execute(f"SELECT * FROM {view} LIMIT 1").fetchall()


def split_stage_run(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    """One stage at concurrency 1000 of provider 'api', split into 4 parts of 250."""
    con = connect(tmp_path / "split.duckdb")
    planned = [
        PlannedShard(f"s0.api.local.{p}", 0, "api", "local", 250, 10, stage_concurrency=1000)
        for p in range(4)
    ]
    RunStore(con).create_run("run", Scenario.model_validate(REPORT_SCENARIO), planned)
    for p in range(4):
        shard_id = f"s0.api.local.{p}"
        # A worker records its part's share, the streams it drives.
        ctx = RowContext("run", 0, shard_id, 1, "api", "m", "local", "w", "closed", 250)
        rows = [
            record_row(ctx, PlannedRequest(p * 10 + i, 50, 100, "p"), r)
            for i, r in enumerate(evenly_paced(10))
        ]
        batch = BatchMessage("run", shard_id, 1, 0, batch_to_ipc(records_to_batch(rows)))
        ingest_batches(con, [batch])
        RunStore(con).shard_done("run", shard_id, "finished", 1, None)
    return con


def test_a_split_stage_reports_its_level_and_keeps_the_parts_share(tmp_path: Path) -> None:
    from analytics.render.markdown import render_markdown
    from analytics.report.stored import ExactLimits

    con = split_stage_run(tmp_path)
    assert con.execute("SELECT concurrency, part_concurrency, shards FROM stages").fetchall() == [
        (1000, 250, 4)
    ]
    exact = build_report(con, "run")
    stored = build_report(con, "run", exact_limits=ExactLimits(ok_requests=0, itl_gaps=0))
    assert stored.percentiles["method"] != exact.percentiles["method"]  # both paths tested
    for report in (exact, stored):
        (row,) = report.stages
        assert (row["concurrency"], row["part_concurrency"]) == (1000, 250)
        assert row["requests"] == 40
    assert "| api | 0 | local | 1000 | 40 |" in render_markdown(exact)  # conc: the level


def test_a_v6_database_gets_each_stage_level_back_filled(tmp_path: Path) -> None:
    from analytics.store.db import SCHEMA_VERSION

    con = split_stage_run(tmp_path)
    # As v6 stored it: no plan, the parts' shares only (and no stored messages: v8).
    con.execute("DROP TABLE shard_error_messages")
    con.execute("DROP VIEW stage_summary")
    con.execute("ALTER VIEW stage_summary_measured RENAME TO stage_summary")
    for column in ("stage_concurrency", "plan_position", "spec"):
        con.execute(f"ALTER TABLE shards DROP COLUMN {column}")
    con.execute("DELETE FROM schema_version WHERE version >= 7")
    con.close()
    con = connect(tmp_path / "split.duckdb")
    assert con.execute("SELECT max(version) FROM schema_version").fetchone() == (SCHEMA_VERSION,)
    assert con.execute("SELECT concurrency, part_concurrency FROM stages").fetchall() == [
        (1000, 250)
    ]
    assert RunStore(con).stored_plan("run") is None  # re-planned when needed, as before
    (row,) = build_report(con, "run").stages
    assert row["concurrency"] == 1000
