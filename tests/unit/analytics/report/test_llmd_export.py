"""A stored run as llm-d benchmark reports: the figures are the report's own rows, the
fields llm-d's schema 0.2 names, and the reports import back (analytics/imports/llmd.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
import yaml

from analytics.imports.tools import runs_in
from analytics.report.build import UnknownRunError, build_report
from analytics.report.llmd_export import llmd_report
from analytics.report.stored import ExactLimits
from analytics.store.db import connect
from tests.support.builders import MS, REPORT_SCENARIO, S, failed_result, ok_result, store_run
from workers.client.errors import ErrorClass

FORCE_STORED = ExactLimits(ok_requests=0, itl_gaps=0)

# The keys llm-d's schema 0.2 allows where the export writes (every model there forbids
# others: llm-d/llm-d-benchmark llmdbenchmark/analysis/benchmark_report/schema_v0_2.py).
STATS = {"units", "mean", "mode", "stddev", "min", "p0p1", "p1", "p5", "p10", "p25", "p50"}
STATS |= {"p75", "p90", "p95", "p99", "p99p9", "max"}
ALLOWED: dict[str, set[str]] = {
    "": {"version", "run", "scenario", "results"},
    "run": {"uid", "eid", "cid", "pid", "time", "user", "description", "keywords"},
    "run.time": {"start", "end", "duration"},
    "scenario": {"stack", "load"},
    "stack": {"metadata", "standardized", "native"},
    "stack.metadata": {"schema_version", "label", "cfg_id", "description"},
    "stack.native": {"args", "envars", "config"},
    "load": {"metadata", "standardized", "native"},
    "load.metadata": {"schema_version", "cfg_id", "description"},
    "load.standardized": {"tool", "tool_version", "parallelism", "source", "stage"}
    | {"input_seq_len", "output_seq_len", "prefix", "multi_turn", "rate_qps", "concurrency"},
    "seq": {"distribution", "value", "std_dev", "min", "max"},
    "results": {"request_performance", "observability", "profiling", "component_health"},
    "request_performance": {"aggregate", "time_series"},
    "aggregate": {"requests", "latency", "throughput"},
    "requests": {"total", "failures", "incomplete", "input_length", "output_length"},
    "latency": {"time_to_first_token", "normalized_time_per_output_token"}
    | {"time_per_output_token", "inter_token_latency", "request_latency"},
    "throughput": {"input_token_rate", "output_token_rate", "total_token_rate", "request_rate"},
}


@pytest.fixture
def run_db(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    """Two providers, two stages; lognormal TTFT and gaps, a few failures."""
    rng = np.random.default_rng(28)
    shards = {}
    for provider in ("api", "gpu"):
        for stage in (0, 1):
            results = [
                ok_result(
                    10 * S + i * 40 * MS,
                    float(rng.lognormal(4.0 + stage, 0.4)),
                    list(rng.lognormal(2.0, 0.3, size=int(rng.integers(2, 12)))),
                )
                for i in range(150)
            ]
            results += [failed_result(10 * S + i * MS, ErrorClass.HTTP_5XX) for i in range(3)]
            shards[(provider, stage)] = results
    con = connect(tmp_path / "run.duckdb")
    store_run(con, "run", REPORT_SCENARIO, shards)
    return con


def _keys_allowed(report: Mapping[str, Any]) -> None:
    def check(value: Mapping[str, Any], where: str) -> None:
        extra = set(value) - ALLOWED[where]
        assert not extra, (where, extra)

    check(report, "")
    check(report["run"], "run")
    check(report["run"]["time"], "run.time")
    check(report["scenario"], "scenario")
    for component in report["scenario"]["stack"]:
        check(component, "stack")
        check(component["metadata"], "stack.metadata")
        check(component["native"], "stack.native")
        assert component["standardized"]["kind"] == "generic"  # extra keys allowed there
    load = report["scenario"]["load"]
    check(load, "load")
    check(load["metadata"], "load.metadata")
    check(load["standardized"], "load.standardized")
    check(load["standardized"]["input_seq_len"], "seq")
    check(report["results"], "results")
    check(report["results"]["request_performance"], "request_performance")
    aggregate = report["results"]["request_performance"]["aggregate"]
    check(aggregate, "aggregate")
    for part in ("requests", "latency", "throughput"):
        check(aggregate[part], part)
        for value in aggregate[part].values():
            if isinstance(value, dict):
                assert set(value) <= STATS and "units" in value and "mean" in value


def test_one_report_per_stage_and_provider_from_the_report_rows(
    run_db: duckdb.DuckDBPyConnection,
) -> None:
    reports = llmd_report(run_db, "run")
    rows = build_report(run_db, "run", plots=False).stages
    assert len(reports) == len(rows) == 4
    for report, row in zip(reports, rows, strict=True):
        _keys_allowed(report)
        assert report["version"] == "0.2"
        assert report["run"]["eid"] == "run"
        assert report["run"]["uid"] == f"run.s{row['stage']}.{row['provider']}.local"
        (component,) = report["scenario"]["stack"]
        assert component["metadata"]["label"] == row["provider"]
        assert component["standardized"]["model"] == {"name": "simulated"}
        load = report["scenario"]["load"]["standardized"]
        assert (load["tool"], load["stage"], load["concurrency"]) == ("tokenbench", row["stage"], 1)
        assert load["source"] == "random"
        assert load["input_seq_len"] == {"distribution": "fixed", "value": 50}
        assert load["output_seq_len"] == {"distribution": "fixed", "value": 100}
        aggregate = report["results"]["request_performance"]["aggregate"]
        assert aggregate["requests"]["total"] == row["requests"] == 153
        assert aggregate["requests"]["failures"] == row["errors"] == 3
        assert aggregate["requests"]["input_length"]["mean"] == row["input_tokens"] / row["ok"]
        latency = aggregate["latency"]
        for key, metric in [
            ("time_to_first_token", "ttft"),
            ("inter_token_latency", "itl"),
            ("time_per_output_token", "tpot"),
            ("request_latency", "e2e"),
        ]:
            stats = latency[key]
            # Two aggregations of the same rows: DuckDB sums in parallel in no fixed order.
            assert stats["p50"] == pytest.approx(row[f"{metric}_p50_ms"], rel=1e-9)
            assert stats["p99"] == pytest.approx(row[f"{metric}_p99_ms"], rel=1e-9)
            assert stats["p99p9"] == pytest.approx(row[f"{metric}_p999_ms"], rel=1e-9)
            assert stats["mean"] == pytest.approx(row[f"{metric}_mean_ms"], rel=1e-9)
            assert stats["stddev"] == pytest.approx(row[f"{metric}_std_ms"], rel=1e-9)
        assert latency["time_to_first_token"]["units"] == "ms"
        assert latency["inter_token_latency"]["units"] == "ms/token"
        throughput = aggregate["throughput"]
        assert throughput["output_token_rate"] == {"units": "tokens/s", "mean": row["output_tok_s"]}
        assert throughput["request_rate"] == {"units": "queries/s", "mean": row["request_rate"]}
        assert throughput["total_token_rate"]["mean"] == pytest.approx(
            row["input_tok_s"] + row["output_tok_s"]
        )
        json.dumps(report)  # JSON-ready


def test_a_large_run_exports_the_stored_aggregates_figures(
    run_db: duckdb.DuckDBPyConnection,
) -> None:
    reports = llmd_report(run_db, "run", exact_limits=FORCE_STORED)
    rows = build_report(run_db, "run", plots=False, exact_limits=FORCE_STORED).stages
    for report, row in zip(reports, rows, strict=True):
        ttft = report["results"]["request_performance"]["aggregate"]["latency"][
            "time_to_first_token"
        ]
        assert ttft["p90"] == row["ttft_p90_ms"]


def test_an_open_loop_carries_its_offered_rate(tmp_path: Path) -> None:
    con = connect(tmp_path / "open.duckdb")
    results = [ok_result(10 * S + i * 250 * MS, 60.0, [5.0] * 9) for i in range(40)]
    store_run(con, "open", REPORT_SCENARIO, {("api", 0): results}, load_kind="open")
    con.execute("""UPDATE shards SET spec = '{"rate": {"rps": 4.0}}' WHERE run_id = 'open'""")
    (report,) = llmd_report(con, "open")
    load = report["scenario"]["load"]["standardized"]
    assert load["rate_qps"] == 4.0 and load["concurrency"] == 1  # the in-flight cap
    (run,) = runs_in({"open.json": json.dumps(report).encode()}, "llmd")
    assert (run.stages[0].load_kind, run.stages[0].rate_per_s) == ("rate", 4.0)


def test_the_reports_import_back_with_the_same_figures(
    run_db: duckdb.DuckDBPyConnection,
) -> None:
    reports = llmd_report(run_db, "run")
    files = {
        f"benchmark_report_{i}.{'yaml' if i % 2 else 'json'}": (
            yaml.safe_dump(r).encode() if i % 2 else json.dumps(r).encode()
        )
        for i, r in enumerate(reports)
    }
    runs = sorted(runs_in(files), key=lambda r: r.target or "")
    rows = build_report(run_db, "run", plots=False).stages
    assert [r.target for r in runs] == ["api", "gpu"]  # one run per provider
    for run in runs:
        assert (run.tool, run.model, run.per_request) == ("llmd", "simulated", False)
        assert run.notes == ()  # tokenbench's own definitions
        assert run.format == "llm-d benchmark report 0.2, harness tokenbench"
        assert [(s.label, s.load_kind, s.concurrency) for s in run.stages] == [
            ("stage 0", "concurrency", 1),
            ("stage 1", "concurrency", 1),
        ]
        for stage in run.stages:
            (row,) = [r for r in rows if (r["provider"], r["stage"]) == (run.target, stage.index)]
            figures = {(f.figure, f.stat): f.value for f in stage.summary}
            for metric in ("ttft", "itl", "tpot", "e2e"):
                for label in ("p50", "p90", "p95", "p99", "p999", "mean", "std"):
                    column = f"{metric}_{label}_ms"
                    assert figures[(metric, label)] == pytest.approx(row[column]), column
            assert figures[("output_tokens_per_s", "rate")] == pytest.approx(row["output_tok_s"])
            assert figures[("requests_per_s", "rate")] == pytest.approx(row["request_rate"])
            assert figures[("output_tokens", "mean")] == pytest.approx(
                row["output_tokens"] / row["ok"]
            )


def test_an_unknown_run_is_refused(run_db: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(UnknownRunError):
        llmd_report(run_db, "nope")
