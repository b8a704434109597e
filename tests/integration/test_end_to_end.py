"""A scenario through real processes: CLI → Celery worker → Arrow over Redis → DuckDB."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest
import yaml

from tests.conftest import CliResult, Proc

pytestmark = pytest.mark.integration


def write_scenario(path: Path, providers: list[dict[str, object]], **load: object) -> Path:
    scenario = {
        "name": "itest",
        "providers": providers,
        "workload": {
            "mix": [
                {
                    "weight": 1,
                    "prompt_tokens": {"dist": "fixed", "value": 64},
                    "output_tokens": {"dist": "uniform", "min": 16, "max": 48},
                }
            ]
        },
        "load": {"concurrency": [1, 8], "requests_per_level": 24, **load},
        "regions": ["eu"],
    }
    path.write_text(yaml.safe_dump(scenario))
    return path


@pytest.mark.serial  # it measures latencies: nothing may run beside it
def test_run_records_one_row_per_request_with_accurate_latencies(
    tmp_path: Path,
    eu_worker: Proc,
    worker_env: dict[str, str],
    tokenbench: Callable[..., CliResult],
) -> None:
    scenario = write_scenario(
        tmp_path / "s.yaml",
        [{"name": "sim", "kind": "simulated", "simulate": {"ttft_ms": 100, "itl_ms": 10}}],
    )
    db = tmp_path / "results.duckdb"
    result = tokenbench("run", str(scenario), "--db", str(db), env=worker_env)
    assert result.code == 0, result.stderr + result.stdout + eu_worker.text()[-3000:]

    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute(
        "SELECT stage, seq, ttft_ms, itl_ns, completion_tokens, planned_output_tokens, "
        "token_count_source, status FROM requests ORDER BY stage, seq"
    ).fetchall()
    # Exactly one row per planned request: 2 stages × 24, sequence numbers 0..23 each.
    assert [(r[0], r[1]) for r in rows] == [(s, q) for s in (0, 1) for q in range(24)]
    assert {r[7] for r in rows} == {"ok"}
    assert con.execute("SELECT count(*) FROM request_records").fetchone() == (48,)

    ttft = [r[2] for r in rows]
    gaps_ms = [g / 1e6 for r in rows for g in r[3]]
    assert 100 <= statistics.median(ttft) <= 110
    assert 10 <= statistics.median(gaps_ms) <= 12
    # The server's usage is the source of counts, and it honoured max_tokens.
    assert all(r[4] == r[5] for r in rows)
    assert {r[6] for r in rows} == {"usage"}
    # Each request has one ITL gap per token after the first.
    assert all(len(r[3]) == r[4] - 1 for r in rows)

    # Each accepted attempt stored its client's self-measurement, and the report read it.
    health = [json.loads(h) for (h,) in con.execute("SELECT health FROM shard_attempts").fetchall()]
    assert len(health) == 2
    assert all(float(h["loop_lag_p99_ms"]) >= 0 for h in health)

    # The table names the provider and both stages; `report` prints the same again.
    assert "sim" in result.stdout and "TTFT latency (ms)" in result.stdout
    again = tokenbench("report", "--db", str(db), "--format", "json")
    assert again.code == 0, again.stderr
    assert '"requests": 24' in again.stdout


def test_failing_providers_become_classified_rows_and_the_run_completes(
    tmp_path: Path,
    eu_worker: Proc,
    worker_env: dict[str, str],
    tokenbench: Callable[..., CliResult],
) -> None:
    from api.local.redis_server import free_port

    closed_port = free_port()  # nothing listens there: connections are refused
    providers: list[dict[str, object]] = [
        {"name": "good", "kind": "simulated", "simulate": {"ttft_ms": 20, "itl_ms": 2}},
        {
            "name": "refused",
            "kind": "openai",
            "base_url": f"http://127.0.0.1:{closed_port}/v1",
            "model": "m",
        },
        {"name": "broken", "kind": "simulated", "simulate": {"error_rate": 1.0}},
        {
            "name": "stalled",
            "kind": "simulated",
            "timeout_s": 0.5,
            "simulate": {"stall_rate": 1.0, "stall_ms": 3000, "ttft_ms": 10, "itl_ms": 1},
        },
        {
            "name": "cut",
            "kind": "simulated",
            "simulate": {"cut_rate": 1.0, "ttft_ms": 5, "itl_ms": 1},
        },
    ]
    scenario = write_scenario(tmp_path / "f.yaml", providers, concurrency=[4], requests_per_level=8)
    db = tmp_path / "f.duckdb"
    result = tokenbench("run", str(scenario), "--db", str(db), env=worker_env)
    # The run completes and stores every row, but its figures for the failing providers
    # are not a benchmark: exit 1, each failed stage named (README, exit codes).
    assert result.code == 1, result.stderr + result.stdout
    for name in ("refused", "broken", "stalled", "cut"):
        assert f"{name} stage 0 (eu): 8 of 8 requests failed (100.0 %)" in result.stderr
    assert "good stage 0" not in result.stderr

    con = duckdb.connect(str(db), read_only=True)
    by_provider = dict(
        con.execute(
            "SELECT provider, list(DISTINCT coalesce(error_class, 'ok')) FROM requests "
            "GROUP BY provider"
        ).fetchall()
    )
    assert by_provider == {
        "good": ["ok"],
        "refused": ["connect"],
        "broken": ["http_5xx"],
        "stalled": ["timeout"],
        "cut": ["protocol"],
    }
    counts = dict(con.execute("SELECT provider, count(*) FROM requests GROUP BY 1").fetchall())
    assert counts == {p["name"]: 8 for p in providers}  # no request lost
    statuses = {
        r[0]
        for r in con.execute(
            "SELECT DISTINCT http_status FROM requests WHERE provider='broken'"
        ).fetchall()
    }
    assert statuses == {500}
    messages = [
        r[0]
        for r in con.execute("SELECT error_message FROM requests WHERE status='error'").fetchall()
    ]
    assert all(m and "Traceback" not in m for m in messages)
    for label in ("connect=8", "http_5xx=8", "timeout=8", "protocol=8"):
        assert label in result.stdout
