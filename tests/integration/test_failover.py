"""Gateway failover measured end to end: a real `tokenbench run` (embedded Redis and
worker) through two `tokenbench gateway` processes - one with a fallback, one without -
in front of two simulated upstreams that the run starts at fixed ports; the first
upstream stalls and answers 429 to every request in bursts. The records, the upstream
logs the run stored and the report must tell the same story."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
import yaml

from api.local.redis_server import free_port
from api.rest.validation import UPSTREAMS_REFUSED
from tests.conftest import API_TOKEN, CliResult, start_control_plane
from tests.support.failover_stack import (
    GatewayProcess,
    bursting_upstreams,
    failover_scenario,
    gateway_config,
    start_gateway,
    start_simulator,
)
from workers.client.request_ids import REQUEST_ID_HEADER

pytestmark = pytest.mark.integration

STALL_MS = 300.0  # how long the first upstream takes to fail a request in a burst
REQUESTS = 40
RPS = 10.0


class Stack:
    def __init__(self, api: str, tmp: Path, port_a: int, port_b: int) -> None:
        self.api, self.tmp, self.port_a, self.port_b = api, tmp, port_a, port_b
        self.with_fallback: GatewayProcess | None = None
        self.without_fallback: GatewayProcess | None = None


@pytest.fixture(scope="module")
def stack(worker_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("failover")
    proc, api = start_control_plane(worker_env, tmp / "api.duckdb", tmp / "api.log")
    port_a, port_b = free_port(), free_port()
    up_a, up_b = f"http://127.0.0.1:{port_a}/v1", f"http://127.0.0.1:{port_b}/v1"
    env = {**worker_env, "TOKENBENCH_TOKEN": API_TOKEN}
    stack = Stack(api, tmp, port_a, port_b)
    try:
        stack.with_fallback = start_gateway(
            gateway_config(up_a, [up_b]), "gw-fallback", tmp, api, env
        )
        stack.without_fallback = start_gateway(gateway_config(up_a, []), "gw-plain", tmp, api, env)
        yield stack
    finally:
        for gateway in (stack.with_fallback, stack.without_fallback):
            if gateway is not None:
                gateway.stop()
        proc.stop()


def _run_env() -> dict[str, str]:
    # The embedded default: its own Redis and worker, not the session's.
    return {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH")}


@pytest.fixture(scope="module")
def failover_run(stack: Stack) -> dict[str, Any]:
    """The run's report (JSON), and its DuckDB file."""
    assert stack.with_fallback is not None and stack.without_fallback is not None
    scenario = failover_scenario(
        "failover-it",
        {"via-fallback": stack.with_fallback.base, "no-fallback": stack.without_fallback.base},
        bursting_upstreams(stack.port_a, stack.port_b, STALL_MS),
        REQUESTS,
        RPS,
    )
    path = stack.tmp / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    db, report = stack.tmp / "run.duckdb", stack.tmp / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "api", "run", str(path), "--db", str(db), "--format", "json",
         "-o", str(report)],
        capture_output=True, text=True, env=_run_env(), timeout=600, check=False,
        cwd=Path(__file__).resolve().parents[2], stdin=subprocess.DEVNULL,
    )  # fmt: skip
    # 1: a stage above --max-error-rate (every request of no-fallback failed, if all of
    # them met a burst); never 2 or a crash.
    assert done.returncode in (0, 1), done.stderr
    assert f"upstream up-a on http://127.0.0.1:{stack.port_a}/v1" in done.stderr
    return {"report": json.loads(report.read_text()), "db": db}


def _records(db: Path) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]]]:
    """Records by provider, and each record's log entries by its id, read raw."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        cols = ["provider", "client_request_id", "prompt_hash", "status", "error_class",
                "http_status", "ttft_ns"]  # fmt: skip
        rows = con.execute(f"SELECT {', '.join(cols)} FROM requests").fetchall()
        entries = con.execute(
            "SELECT request_id, upstream, outcome, status, received_at, seq "
            "FROM upstream_requests ORDER BY received_at, upstream, seq"
        ).fetchall()
    finally:
        con.close()
    by_provider: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_provider[row[0]].append(dict(zip(cols, row, strict=True)))
    attempts: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for request_id, upstream, outcome, status, _, _ in entries:
        attempts[request_id].append({"upstream": upstream, "outcome": outcome, "status": status})
    return by_provider, attempts


def _row(report: dict[str, Any], section: str, **keys: Any) -> dict[str, Any]:
    rows = [r for r in report[section] if all(r[k] == v for k, v in keys.items())]
    assert len(rows) == 1, (section, keys, report[section])
    return rows[0]


def test_every_request_is_found_in_the_upstream_logs(failover_run: dict[str, Any]) -> None:
    by_provider, attempts = _records(failover_run["db"])
    assert {len(v) for v in by_provider.values()} == {REQUESTS}
    for records in by_provider.values():
        for record in records:
            assert record["client_request_id"] is not None
            assert record["prompt_hash"] is not None
            # The gateway forwarded the id header: every request reached up-a first.
            tries = attempts[record["client_request_id"]]
            assert tries, record
            assert tries[0]["upstream"] == "up-a"
    logs = {r["upstream"]: r for r in failover_run["report"]["upstream_logs"]}
    assert set(logs) == {"up-a", "up-b"}
    assert all(r["missed"] == 0 and r["unmatched"] == 0 for r in logs.values())


def test_the_gateway_with_a_fallback_serves_every_429_from_the_second_upstream(
    failover_run: dict[str, Any],
) -> None:
    by_provider, attempts = _records(failover_run["db"])
    fell_back, first_try = [], []
    for record in by_provider["via-fallback"]:
        tries = attempts[record["client_request_id"]]
        assert record["status"] == "ok", record  # the client never saw the 429s
        if tries[0]["outcome"] == "http_429":
            assert [t["upstream"] for t in tries] == ["up-a", "up-b"]
            assert tries[1]["outcome"] == "ok"
            fell_back.append(record)
        else:
            assert [t["upstream"] for t in tries] == ["up-a"]
            first_try.append(record)
    # The first request opens up-a's burst clock inside a burst; bursts cover half the time.
    assert fell_back and first_try
    # A fallback costs at least the time the first upstream took to fail.
    assert min(r["ttft_ns"] for r in fell_back) >= STALL_MS * 1e6

    report = failover_run["report"]
    row = _row(report, "failover", provider="via-fallback", stage=0)
    assert row["requests"] == row["attributed"] == REQUESTS
    assert row["fell_back"] == len(fell_back)
    assert row["fallback_pct"] == pytest.approx(100 * len(fell_back) / REQUESTS)
    assert row["client_error_pct"] == 0
    assert row["ttft_fell_back_p50_ms"] >= STALL_MS
    assert row["failover_mean_ms"] >= STALL_MS
    up_a = _row(report, "upstreams", provider="via-fallback", upstream="up-a")
    up_b = _row(report, "upstreams", provider="via-fallback", upstream="up-b")
    assert up_a["received"] == up_a["first_tries"] == REQUESTS
    assert up_a["http_429"] == len(fell_back)
    assert up_a["error_pct"] == pytest.approx(100 * len(fell_back) / REQUESTS)
    assert up_b["received"] == up_b["ok"] == len(fell_back)
    assert up_b["first_tries"] == 0 and up_b["error_pct"] == 0


def test_the_gateway_without_a_fallback_passes_the_429s_to_clients(
    failover_run: dict[str, Any],
) -> None:
    by_provider, attempts = _records(failover_run["db"])
    failed = 0
    for record in by_provider["no-fallback"]:
        tries = attempts[record["client_request_id"]]
        assert [t["upstream"] for t in tries] == ["up-a"]
        if tries[0]["outcome"] == "http_429":
            assert (record["status"], record["error_class"], record["http_status"]) == (
                "error",
                "http_429",
                429,
            )
            failed += 1
        else:
            assert record["status"] == "ok"
    assert failed > 0
    report = failover_run["report"]
    row = _row(report, "failover", provider="no-fallback", stage=0)
    assert row["fell_back"] == 0
    assert row["client_error_pct"] == pytest.approx(100 * failed / REQUESTS)
    up_a = _row(report, "upstreams", provider="no-fallback", upstream="up-a")
    assert up_a["http_429"] == failed
    assert not [
        r for r in report["upstreams"] if r["provider"] == "no-fallback" and r["upstream"] == "up-b"
    ]


def test_gateway_stats_count_the_fallbacks(stack: Stack, failover_run: dict[str, Any]) -> None:
    assert stack.with_fallback is not None and stack.without_fallback is not None
    base = stack.with_fallback.base.removesuffix("/v1")
    stats = httpx.get(f"{base}/gateway/stats", timeout=10).json()
    row = _row(failover_run["report"], "failover", provider="via-fallback", stage=0)
    assert stats["fallbacks"] == row["fell_back"]
    plain = stack.without_fallback.base.removesuffix("/v1")
    assert httpx.get(f"{plain}/gateway/stats", timeout=10).json()["fallbacks"] == 0


def test_a_bad_fault_spec_is_exit_2_naming_the_field(
    stack: Stack, tokenbench: Callable[..., CliResult]
) -> None:
    upstreams = bursting_upstreams(free_port(), free_port(), 0)
    upstreams[0]["simulate"]["faults"][0]["burst"] = {"every_s": 1, "for_s": 2}
    scenario = failover_scenario("bad-fault", {"p": "http://127.0.0.1:9/v1"}, upstreams, 1, 1.0)
    path = stack.tmp / "bad.yaml"
    path.write_text(yaml.safe_dump(scenario))
    result = tokenbench("run", str(path), env=_run_env())
    assert result.code == 2, result.stderr
    assert "upstreams.0.simulate.faults.0" in result.stderr
    assert "for_s 2 is longer than every_s 1" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_taken_port_is_exit_2_naming_the_upstream(
    stack: Stack, tokenbench: Callable[..., CliResult]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        upstreams = bursting_upstreams(free_port(), port, 0)
        scenario = failover_scenario("taken", {"p": "http://127.0.0.1:9/v1"}, upstreams, 1, 1.0)
        path = stack.tmp / "taken.yaml"
        path.write_text(yaml.safe_dump(scenario))
        result = tokenbench("run", str(path), env=_run_env())
    assert result.code == 2, result.stderr
    assert f"upstreams.1.port: 127.0.0.1:{port} cannot be used" in result.stderr


def test_rest_refuses_upstreams_and_bad_faults_with_422_at_the_field(stack: Stack) -> None:
    headers = {"authorization": f"Bearer {API_TOKEN}"}
    scenario = failover_scenario(
        "rest", {"p": "http://127.0.0.1:9/v1"}, bursting_upstreams(9101, 9102, 0), 1, 1.0
    )
    answer = httpx.post(f"{stack.api}/v1/scenarios", json=scenario, headers=headers, timeout=30)
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"] == [{"loc": ["scenario", "upstreams"], "msg": UPSTREAMS_REFUSED}]

    simulated = {**scenario, "upstreams": []}
    simulated["providers"] = [
        {
            "name": "sim",
            "kind": "simulated",
            "simulate": {"faults": [{"kind": "http_5xx", "rate": 0.5, "status": 404}]},
        }
    ]
    answer = httpx.post(f"{stack.api}/v1/scenarios", json=simulated, headers=headers, timeout=30)
    assert answer.status_code == 422, answer.text
    (problem,) = answer.json()["detail"]
    assert problem["loc"] == [
        "scenario", "providers", 0, "simulate", "faults", 0, "http_5xx", "status"
    ]  # fmt: skip


def test_a_chain_of_failures_before_any_byte_reaches_the_last_fallback(
    stack: Stack, worker_env: dict[str, str]
) -> None:
    """Unreachable, then reset, then 503: the fourth target answers; a stream cut after
    its first bytes is the client's failure, never a fallback."""
    fast = ["--ttft-ms", "1", "--itl-ms", "1"]
    reset = start_simulator([*fast, "--fault", "reset:rate=1"], stack.tmp / "reset.log")
    broken = start_simulator([*fast, "--fault", "http_5xx:rate=1"], stack.tmp / "503.log")
    healthy = start_simulator(fast, stack.tmp / "healthy.log")
    cutting = start_simulator([*fast, "--fault", "cut:rate=1"], stack.tmp / "cut.log")
    closed = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    env = {**worker_env, "TOKENBENCH_TOKEN": API_TOKEN}
    chain = start_gateway(
        gateway_config(closed, [reset.base, broken.base, healthy.base]), "gw-chain",
        stack.tmp, stack.api, env,
    )  # fmt: skip
    cut = start_gateway(
        gateway_config(cutting.base, [healthy.base]), "gw-cut", stack.tmp, stack.api, env
    )
    try:
        body = {"model": "m", "max_tokens": 6, "stream": True,
                "messages": [{"role": "user", "content": "through the chain"}]}  # fmt: skip
        tagged = {REQUEST_ID_HEADER: "tokenbench.s0.chain.local.1.0"}
        answer = httpx.post(f"{chain.base}/chat/completions", json=body, headers=tagged, timeout=30)
        assert answer.status_code == 200 and b"[DONE]" in answer.content
        stats = httpx.get(chain.base.replace("/v1", "/gateway/stats"), timeout=10).json()
        assert stats["fallbacks"] == 3
        # Each upstream that was reached saw the request id the client sent.
        for simulator, outcome in ((reset, "reset"), (broken, "http_5xx"), (healthy, "ok")):
            log = httpx.get(simulator.base.replace("/v1", "/tokenbench/requests")).json()
            assert [(e["request_id"], e["outcome"]) for e in log["entries"]] == [
                ("tokenbench.s0.chain.local.1.0", outcome)
            ]

        with pytest.raises(httpx.RemoteProtocolError):  # cut halfway: the client sees it
            httpx.post(f"{cut.base}/chat/completions", json=body, timeout=30).read()
        stats = httpx.get(cut.base.replace("/v1", "/gateway/stats"), timeout=10).json()
        assert stats["fallbacks"] == 0
        healthy_log = httpx.get(healthy.base.replace("/v1", "/tokenbench/requests")).json()
        assert len(healthy_log["entries"]) == 1  # the chain's request only
    finally:
        for part in (chain, cut, reset, broken, healthy, cutting):
            part.stop()
