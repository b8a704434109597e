"""Server telemetry through a real `tokenbench run` (embedded Redis, a real worker, DuckDB):
the batching simulator's /metrics is scraped while the load runs, the samples and the
canonical view hold what the server did (never more running than the stage's users or
the batch, a queue once the users outnumber the batch), the report has its sections;
failing metrics endpoints are recorded scrape errors and the run still succeeds."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from tests.conftest import CliResult

pytestmark = pytest.mark.integration

MAX_BATCH = 2
LEVELS = [1, 6]


def _workload() -> dict[str, Any]:
    return {
        "mix": [
            {
                "prompt_tokens": {"dist": "fixed", "value": 64},
                "output_tokens": {"dist": "fixed", "value": 48},
            }
        ]
    }


def _run(
    tokenbench: Callable[..., CliResult], tmp_path: Path, scenario: dict[str, Any], *args: str
) -> tuple[dict[str, Any], duckdb.DuckDBPyConnection]:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    db = tmp_path / "run.duckdb"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH__")}
    result = tokenbench("run", str(path), "--db", str(db), "--format", "json", *args, env=env)
    assert result.code == 0, result.stderr
    report = json.loads(result.stdout[result.stdout.index("{") :])
    return report, duckdb.connect(str(db), read_only=True)


def test_the_batching_simulators_queue_is_scraped_stored_and_reported(
    tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    scenario = {
        "name": "telemetry",
        "seed": 11,
        "providers": [
            {
                "name": "sim",
                "kind": "simulated",
                "metrics_url": "/metrics",
                "metrics_interval_s": 0.25,
                "simulate": {"model": "llama-3.1-8b", "max_batch": MAX_BATCH},
            }
        ],
        "workload": _workload(),
        "load": {"concurrency": LEVELS, "requests_per_level": 36},
    }
    report, con = _run(tokenbench, tmp_path, scenario)
    assert report["state"] == "finished"
    scrapes = con.execute(
        "SELECT stage, status, series, scraped_at FROM server_metric_scrapes ORDER BY stage"
    ).fetchall()
    assert {stage for stage, *_ in scrapes} == {0, 1}
    assert all(status == "ok" and series == 5 for _, status, series, _ in scrapes), scrapes
    # Raw samples keep the server's own names and labels.
    names = {row[0] for row in con.execute("SELECT DISTINCT metric FROM server_metrics").fetchall()}
    assert names == {
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
    }
    labels = con.execute("SELECT DISTINCT labels['model_name'] FROM server_metrics").fetchall()
    assert labels == [("simulated",)]
    figures = con.execute(
        "SELECT stage, metric, max(value), min(value) FROM server_metrics_canonical "
        "GROUP BY stage, metric"
    ).fetchall()
    by = {(stage, metric): (high, low) for stage, metric, high, low in figures}
    for stage, users in enumerate(LEVELS):
        running_max, running_min = by[(stage, "running_requests")]
        assert running_min >= 0 and running_max <= min(users, MAX_BATCH)
        assert by[(stage, "kv_cache_usage")][1] >= 0 and by[(stage, "kv_cache_usage")][0] <= 1
    # Whatever the server holds, running or waiting, is at most the stage's users (a
    # request just sent may wait for the next step even alone); six users on a batch of
    # two queue.
    in_server = con.execute(
        "SELECT stage, max(value) FROM (SELECT stage, scrape_seq, sum(value) AS value "
        "FROM server_metrics_canonical WHERE metric IN ('running_requests', 'waiting_requests') "
        "GROUP BY stage, shard_id, attempt, scrape_seq) GROUP BY stage ORDER BY stage"
    ).fetchall()
    assert [stage for stage, _ in in_server] == [0, 1]
    assert all(0 < held <= LEVELS[stage] for stage, held in in_server), in_server
    assert by[(1, "waiting_requests")][0] > 0
    assert by[(1, "running_requests")][0] == MAX_BATCH
    # The counters end at what the run sent: 72 answers of 48 tokens.
    (sent,) = con.execute(
        "SELECT max(value) FROM server_metrics_canonical WHERE metric = 'generation_tokens_total'"
    ).fetchone() or (0,)
    (recorded,) = con.execute("SELECT sum(completion_tokens) FROM requests").fetchone() or (0,)
    assert sent == recorded == 72 * 48
    assert by[(1, "generation_tokens_per_s")][0] > 0

    section = report["server_metrics"]
    summary = {(r["stage"], r["metric"]): r for r in section["summary"]}
    assert summary[(1, "waiting_requests")]["max"] > 0
    assert summary[(1, "running_requests")]["max"] == MAX_BATCH
    assert summary[(0, "running_requests")]["mean"] <= 1
    assert {r["stage"]: r["errors"] for r in section["scrapes"]} == {0: 0, 1: 0}
    timeline = report["plots"]["server_timeline"]
    (series,) = timeline["series"]
    assert set(series["values"]) == {
        "running_requests",
        "waiting_requests",
        "kv_cache_usage",
        "ttft_p50_ms",
    }
    html = tmp_path / "report.html"
    markdown = tokenbench(
        "report", "--db", str(tmp_path / "run.duckdb"), "--format", "markdown"
    ).stdout
    assert "## Server telemetry" in markdown
    done = tokenbench(
        "report", "--db", str(tmp_path / "run.duckdb"), "--format", "html", "-o", str(html)
    )
    assert done.code == 0, done.stderr
    page = html.read_text()
    assert 'id="chart-server-telemetry"' in page and 'id="server-metrics"' in page


ACCEPTANCE = 0.7
DRAFT_TOKENS = 3


def test_cache_speculation_and_energy_figures_from_the_simulators_metrics(
    tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    scenario = {
        "name": "server-figures",
        "seed": 5,
        "providers": [
            {
                "name": "sim",
                "kind": "simulated",
                "metrics_url": "/metrics",
                "metrics_interval_s": 0.25,
                "simulate": {
                    "model": "llama-3.1-8b",
                    "max_batch": 4,
                    "prefix_cache": True,
                    "spec_decode_acceptance": ACCEPTANCE,
                    "spec_decode_tokens": DRAFT_TOKENS,
                    "gpu_power": True,
                },
            }
        ],
        # Prompts of 320 tokens, the first 256 the same: the prefix cache finds them.
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 320},
                    "output_tokens": {"dist": "fixed", "value": 48},
                }
            ],
            "shared_prefix_tokens": 256,
        },
        "load": {"concurrency": [4], "requests_per_level": 40},
    }
    report, con = _run(tokenbench, tmp_path, scenario)
    assert report["state"] == "finished"
    names = {row[0] for row in con.execute("SELECT DISTINCT metric FROM server_metrics").fetchall()}
    assert {
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:spec_decode_num_drafts_total",
        "vllm:spec_decode_num_draft_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_total",
        "DCGM_FI_DEV_POWER_USAGE",
    } <= names
    (stage,) = report["server_metrics"]["stages"]
    print("server figures:", json.dumps(stage))  # the figures, for the record (pytest -s)
    assert stage["spec_draft_tokens"] > 500
    assert stage["spec_acceptance_rate"] == pytest.approx(ACCEPTANCE, abs=0.06)
    assert stage["spec_mean_accepted_length"] == pytest.approx(
        1 + DRAFT_TOKENS * ACCEPTANCE, abs=0.25
    )
    assert 0.3 < stage["server_prefix_cache_hit_rate"] < 1
    # The server looked up the prompts the records report (all of them, unless the first
    # scrape came after the first requests arrived).
    (prompts,) = con.execute("SELECT sum(prompt_tokens) FROM requests").fetchone() or (0,)
    assert 0 < stage["prefix_cache_queried_tokens"] <= prompts
    assert stage["energy_source"] == "gpu_power_watts"
    assert stage["energy_window_s"] > 0 and stage["output_tokens_in_window"] > 0
    # One GPU between its idle and full draw (100-700 W by default).
    assert 100 <= stage["mean_gpu_power_w"] <= 700
    assert stage["joules_per_output_token"] > 0
    assert stage["joules_per_output_token"] == pytest.approx(
        stage["gpu_energy_j"] / stage["output_tokens_in_window"]
    )
    (figures,) = [s for s in report["sections"] if s["key"] == "server-figures"]
    (row,) = figures["rows"]
    assert row[:3] == ["sim", "local", 0]
    assert row[4] == pytest.approx(100 * stage["spec_acceptance_rate"])


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_failing_metrics_endpoints_are_recorded_and_the_run_succeeds(
    tmp_path: Path,
    tokenbench: Callable[..., CliResult],
    simulate_endpoint: Callable[..., str],
) -> None:
    base = simulate_endpoint(ttft_ms=5, itl_ms=1)
    root = base.removesuffix("/v1")

    def provider(name: str, metrics_url: str) -> dict[str, Any]:
        return {
            "name": name,
            "kind": "openai",
            "base_url": base,
            "model": "simulated",
            "metrics_url": metrics_url,
            "metrics_interval_s": 0.25,
        }

    scenario = {
        "name": "telemetry-faults",
        "seed": 2,
        "providers": [
            provider("unreachable", f"http://127.0.0.1:{_closed_port()}/metrics"),
            provider("json", f"{base}/models"),  # an answer, but not Prometheus text
            provider("missing", f"{root}/no-such-path"),
            provider("real", f"{root}/metrics"),  # the same server, scraped by URL
        ],
        "workload": _workload(),
        "load": {"concurrency": [2], "requests_per_level": 8},
    }
    report, con = _run(tokenbench, tmp_path, scenario)
    assert report["state"] == "finished"
    outcomes = con.execute(
        "SELECT provider, count(*) FILTER (status = 'ok'), count(*) FILTER (status = 'error'), "
        "min(error_message), min(http_status) FROM server_metric_scrapes GROUP BY provider"
    ).fetchall()
    by = {row[0]: row[1:] for row in outcomes}
    assert set(by) == {"unreachable", "json", "missing", "real"}
    assert by["unreachable"][0] == 0 and by["unreachable"][1] >= 2
    assert "Connect" in by["unreachable"][2] or "refused" in by["unreachable"][2].lower()
    assert by["json"][0] == 0 and "application/json" in by["json"][2]
    assert by["missing"][0] == 0 and by["missing"][3] == 404
    assert by["real"][1] == 0 and by["real"][0] >= 2
    # Every request is recorded and succeeded, whatever the telemetry did.
    rows = con.execute("SELECT provider, count(*), count(*) FILTER (status = 'ok') FROM requests "
                       "GROUP BY provider").fetchall()  # fmt: skip
    assert sorted(rows) == sorted((name, 8, 8) for name in by)
    scrapes = {r["provider"]: r for r in report["server_metrics"]["scrapes"]}
    assert scrapes["unreachable"]["errors"] == scrapes["unreachable"]["scrapes"]
    assert scrapes["real"]["errors"] == 0
    # The fixed-latency simulator serves in-flight counts: never above the two users.
    (running,) = con.execute(
        "SELECT max(value) FROM server_metrics_canonical "
        "WHERE provider = 'real' AND metric = 'running_requests'"
    ).fetchone() or (None,)
    assert running is not None and 0 <= running <= 2 * 4  # four providers share the server
