"""Stages decided while the run goes, and stages ended early, through real runs.

Each test runs `tokenbench run` on the embedded default (its own Redis, a real worker
process, DuckDB) against the batching simulator: Llama 3.1 8B FP8 on one H100 with at
most 4 sequences and a 15 ms step overhead, so it saturates at a low, known load (tens
of requests per second) with ~19 ms steps: every stage stays a few seconds long.
Assertions are on what the run stored and reported, never on wall-clock times.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
import yaml

from analytics.decide.capacity_search import region_verdict
from api.local.redis_server import RedisServer
from scenarios.providers.simulate import SimulateSpec
from tests.conftest import API_TOKEN, CliResult, start_control_plane, start_worker
from tests.support.polls import wait_for_view
from workers.simulator.capacity import model_capacity, stage_ttfts_ms

pytestmark = pytest.mark.integration

SIMULATE: dict[str, Any] = {
    "model": "llama-3.1-8b",
    "quant": "fp8",
    "hardware": "h100",
    "gpus": 1,
    "max_batch": 4,
    "step_overhead_ms": 15,
    "context": 2048,
}
PROMPT, OUTPUT = 16, 8  # the simulator counts prompt words as tokens


def scenario(load: dict[str, Any], name: str = "adaptive") -> dict[str, Any]:
    return {
        "name": name,
        "providers": [{"name": "sim", "kind": "simulated", "simulate": SIMULATE}],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": PROMPT},
                    "output_tokens": {"dist": "fixed", "value": OUTPUT},
                }
            ],
            # One word a token, as the simulator counts: no calibration warm-up.
            "calibrate": False,
        },
        "load": load,
    }


def embedded_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH__")}


def run_json(
    tokenbench: Callable[..., CliResult], tmp_path: Path, spec: dict[str, Any]
) -> tuple[dict[str, Any], Path]:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(spec))
    db = tmp_path / "run.duckdb"
    result = tokenbench(
        "run", str(path), "--db", str(db), "--format", "json", env=embedded_env(), timeout=600
    )
    assert result.code == 0, result.stderr
    return json.loads(result.stdout), db


def report(tokenbench: Callable[..., CliResult], db: Path, fmt: str) -> str:
    result = tokenbench("report", "latest", "--db", str(db), "--format", fmt)
    assert result.code == 0, result.stderr
    return result.stdout


# --------------------------------------------------------------------------- sweep


@pytest.mark.serial  # it measures latencies: nothing may run beside it
def test_a_sweep_runs_synchronous_throughput_then_rates_between_and_marks_a_knee(
    tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    load = {
        "sweep": {"points": 3, "throughput_concurrency": 16},
        "requests_per_level": 60,
        "duration_s": 5,
    }
    out, db = run_json(tokenbench, tmp_path, scenario(load))
    rows = sorted(out["stages"], key=lambda r: r["stage"])
    assert [r["stage_role"] for r in rows] == [
        "synchronous",
        "throughput",
        "sweep",
        "sweep",
        "sweep",
    ]
    sync, throughput = rows[0]["request_rate"], rows[1]["request_rate"]
    assert 0 < sync < throughput  # the simulator batches: 16 streams serve more than one
    offered = [r["offered_rps"] for r in rows[2:]]
    # Evenly spaced strictly between the two measured rates.
    step = (throughput - sync) / 4
    assert offered == pytest.approx([sync + step * i for i in (1, 2, 3)], rel=1e-3)
    assert all(r["load_kind"] == "open" for r in rows[2:])
    (sweep,) = out["answers"]["sweep"]
    assert [p["stage"] for p in sweep["points"]] == [0, 1, 2, 3, 4]
    knee = sweep["knee"]
    assert knee is not None and knee["outcome"] != "saturated"
    assert knee["ttft_p50_ms"] <= 2 * sweep["points"][0]["ttft_p50_ms"]
    # No point beyond the knee's rate stays within the factor (the rule, checked back).
    faster = [p for p in sweep["points"] if p["request_rate"] > knee["request_rate"]]
    assert all(
        p["ttft_p50_ms"] > 2 * sweep["points"][0]["ttft_p50_ms"] or p["outcome"] == "saturated"
        for p in faster
    )
    con = duckdb.connect(str(db), read_only=True)
    # The decided stages were appended to the stored plan, after the planned ones.
    positions = con.execute(
        "SELECT stage, plan_position FROM shards ORDER BY plan_position"
    ).fetchall()
    assert [stage for stage, _ in positions] == [0, 1, 2, 3, 4]
    assert con.execute("SELECT count(*) FROM adaptive_stages").fetchone() == (5,)
    markdown = report(tokenbench, db, "markdown")
    assert "## Sweep: latency vs throughput" in markdown and "◆ knee" in markdown
    html = report(tokenbench, db, "html")
    assert 'id="chart-sweep-curve"' in html


# --------------------------------------------------------------------------- saturation


def test_an_over_saturated_open_loop_stage_is_stopped_and_marked_with_its_evidence(
    tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    planned = 1200
    # 60 req/s against a server that serves ~20: the queue grows by ~40 requests a second.
    load = {
        "rate": {"rps": [60], "arrival": "constant"},
        "requests_per_level": planned,
        "duration_s": 20,
        "saturation": {"action": "stop", "min_s": 2},
    }
    out, db = run_json(tokenbench, tmp_path, scenario(load))
    (row,) = out["stages"]
    assert row["stage_outcome"] == "saturated"
    (ended,) = out["answers"]["ended"]
    assert ended["outcome"] == "saturated" and ended["acted"]
    assert ended["requests_recorded"] == row["requests"] < planned
    assert ended["requests_saved"] == planned - row["requests"]
    evidence = ended["evidence"]
    assert evidence["signals"][0] == "latency growing"
    ttft = evidence["ttft_from_intent_ms"]
    assert ttft == sorted(ttft) and ttft[-1] >= 2 * ttft[0]
    assert evidence["offered_rps"] == 60
    con = duckdb.connect(str(db), read_only=True)
    # The shard finished normally with what it had recorded; nothing was cancelled.
    assert con.execute("SELECT state FROM shards").fetchall() == [("finished",)]
    assert con.execute("SELECT state FROM runs").fetchall() == [("finished",)]
    table = report(tokenbench, db, "table")
    assert "0 sat" in table and "saturated" in table


# --------------------------------------------------------------------------- capacity


def predicted_capacity(requests: int, duration_s: float, slo_ms: float, confidence: float) -> float:
    """The highest constant rate the simulator's own model holds with the test's SLO:
    the batching scheduler replayed on virtual time for one stage of the test's length,
    judged by the same rule as the search's final verdict (Wilson interval, attainment
    0.9), refined to 0.5 %. From 10 req/s (51 requests in a stage, enough to pass at all)."""
    spec = SimulateSpec(**SIMULATE)

    def holds(rate: float) -> bool:
        ttfts = stage_ttfts_ms(spec, rate, requests, duration_s, PROMPT, OUTPUT)
        met = sum(1 for t in ttfts if t <= slo_ms)
        return region_verdict(met, len(ttfts), 0.9, confidence) == "pass"

    return model_capacity(holds, 10.0, 200.0)


@pytest.mark.serial  # it measures latencies: nothing may run beside it
def test_a_capacity_search_finds_the_simulators_capacity_at_the_slo(
    tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    requests, duration_s, slo_ms = 80, 5.0, 500.0
    load = {
        "find_capacity": {
            "slo": {"ttft_ms": slo_ms},
            "attainment": 0.9,
            "precision": "10%",
            "arrival": "constant",
            "throughput_concurrency": 16,
            "max_stages": 10,
        },
        "requests_per_level": requests,
        "duration_s": duration_s,
        "saturation": {"min_s": 2},
    }
    out, db = run_json(tokenbench, tmp_path, scenario(load, "capacity"))
    (answer,) = out["answers"]["capacity"]
    assert answer["state"] in ("converged", "max_stages"), answer
    low, high = answer["low"], answer["high"]
    assert low is not None and high is not None and low < high
    # The final verdict of a stage spends half the error (docs/answers.md).
    expected = predicted_capacity(requests, duration_s, slo_ms, 0.975)
    # Generous on purpose: the bracket is 10 % wide, and on a loaded 2-core machine the
    # client's send lag and the simulator's late wake-ups add to TTFT from intent near
    # the boundary, where the queue (and so TTFT) grows with every late step; a stage
    # judged one bracket step low or high moves the answer by ~10-20 %.
    assert 0.7 * expected <= answer["capacity"] <= 1.3 * expected, (answer, expected)
    roles = [r["stage_role"] for r in sorted(out["stages"], key=lambda r: r["stage"])]
    assert roles[:2] == ["synchronous", "throughput"] and set(roles[2:]) == {"probe"}
    assert len(roles) <= 10
    con = duckdb.connect(str(db), read_only=True)
    verdicts = dict(con.execute("SELECT stage, verdict FROM stage_verdicts").fetchall())
    assert verdicts[answer["low_stage"]] == "pass" and verdicts[answer["high_stage"]] != "pass"
    # The answer heads every format.
    table = report(tokenbench, db, "table")
    assert table.lstrip().startswith("Capacity") and "holds" in table.splitlines()[1]
    markdown = report(tokenbench, db, "markdown")
    assert markdown.split("\n## ")[1].startswith("Capacity")
    assert "p90 TTFT ≤ 500 ms" in answer["answer"]


# --------------------------------------------------------------------------- stop_when


def test_stop_when_stops_a_stage_once_its_percentile_is_known_precisely_enough(
    tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    planned = 3000
    load = {
        "concurrency": [2],
        "requests_per_level": planned,
        "stop_when": {"metric": "ttft", "quantile": 0.5, "rel_ci": 0.05, "min_requests": 40},
    }
    out, _ = run_json(tokenbench, tmp_path, scenario(load, "stop-when"))
    (row,) = out["stages"]
    (ended,) = out["answers"]["ended"]
    assert ended["outcome"] == "stopped_early" and row["stage_outcome"] == "stopped_early"
    assert 40 <= row["requests"] < planned // 2
    assert ended["requests_saved"] == planned - row["requests"]
    (region,) = ended["evidence"]["regions"].values()
    assert region["n"] >= 40 and region["relative_half_width"] <= 0.05
    assert region["low_ms"] <= region["estimate_ms"] <= region["high_ms"]


# --------------------------------------------------------------------------- restart


def test_a_control_plane_restarted_mid_search_resumes_its_decided_stages(
    tmp_path: Path, redis_server: RedisServer, worker_env: dict[str, str]
) -> None:
    worker = start_worker("adaptive", worker_env, tmp_path / "w.log", redis_server.url)
    db = tmp_path / "restart.duckdb"
    plane, base = start_control_plane(worker_env, db, tmp_path / "plane1.log")
    spec = scenario(
        {
            "find_capacity": {
                "slo": {"ttft_ms": 500},
                "attainment": 0.9,
                "precision": "20%",
                "arrival": "constant",
                "throughput_concurrency": 16,
                "max_stages": 6,
            },
            "requests_per_level": 50,
            "duration_s": 3,
        },
        "restart",
    )
    spec["regions"] = ["adaptive"]
    headers = {"authorization": f"Bearer {API_TOKEN}"}
    try:
        with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
            run_id = client.post("/v1/runs", json={"scenario": spec}).json()["id"]
            # Wait for the first decided stage (a probe), then kill the plane.
            view = wait_for_view(client, run_id, lambda v: len(v["stages"]) >= 3, timeout_s=300)
            assert view["deciding"] and view["stages"][2]["role"] == "probe"
        plane.stop(signal.SIGKILL)
        plane, base = start_control_plane(worker_env, db, tmp_path / "plane2.log")
        with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
            view = wait_for_view(client, run_id, lambda v: v["state"] != "running", timeout_s=300)
    finally:
        plane.stop()
        worker.stop(signal.SIGQUIT)
    assert view["state"] == "finished", view
    assert not view["deciding"]
    stages = view["stages"]
    assert [s["index"] for s in stages] == list(range(len(stages)))
    assert [s["role"] for s in stages][:2] == ["synchronous", "throughput"]
    assert {s["role"] for s in stages[2:]} == {"probe"} and len(stages) <= 6
    con = duckdb.connect(str(db), read_only=True)
    state = con.execute("SELECT state FROM capacity_results WHERE run_id = ?", [run_id]).fetchone()
    assert state is not None and state[0] != "searching"
    # Every decided stage once: its role, its shard, its requests (nothing doubled).
    assert con.execute(
        "SELECT count(*), count(DISTINCT stage) FROM adaptive_stages WHERE run_id = ?", [run_id]
    ).fetchone() == (len(stages), len(stages))
    doubled = con.execute(
        "SELECT count(*) FROM (SELECT stage, seq FROM requests WHERE run_id = ? "
        "GROUP BY ALL HAVING count(*) > 1)",
        [run_id],
    ).fetchone()
    assert doubled == (0,)
