"""SIGTERM does what Ctrl-C does, for every long-running command (real processes).

- ``serve``: stops gracefully and stops its embedded Redis; exit 0.
- ``gateway``: publishes its buffered records and stops the shadow session it opened;
  exit 0.
- ``worker``: its running shard stops, publishes what it recorded, and is run again
  elsewhere by the control plane; exit 0, no simulated endpoint left behind.
- ``run``: tests/integration/test_interrupt.py (the run is cancelled, exit 130).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import httpx
import psutil
import pytest
import redis
import yaml

from api.local.redis_server import RedisServer, free_port
from scenarios.wire.contract import heartbeat_key, owner_key
from tests.conftest import API_TOKEN, REPO, Proc, start_control_plane, start_worker
from tests.faults.conftest import scenario
from tests.support.polls import wait_for_view

pytestmark = pytest.mark.integration

SIGNALS = [signal.SIGTERM, signal.SIGINT]


def _wait(predicate: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not (callable(predicate) and predicate()):
        assert time.monotonic() < deadline, f"{what} not within {timeout_s} s"
        time.sleep(0.1)


def _spawn(args: list[str], log: Path, env: dict[str, str]) -> Proc:
    with log.open("wb") as handle:
        process = subprocess.Popen(
            [sys.executable, "-m", *args],
            stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=REPO,
        )  # fmt: skip
    return Proc(process, log)


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url, timeout=0.5).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.parametrize("sig", SIGNALS, ids=["sigterm", "sigint"])
def test_serve_stops_its_embedded_redis(tmp_path: Path, sig: signal.Signals) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH__")}
    env["TOKENBENCH__API__TOKENS"] = json.dumps([API_TOKEN])
    port = free_port()
    serve = _spawn(
        ["api", "serve", "--port", str(port), "--db", str(tmp_path / "s.duckdb")],
        tmp_path / "serve.log",
        env,
    )
    try:
        _wait(lambda: _healthy(f"http://127.0.0.1:{port}/healthz"), 60, "serve")
        children = psutil.Process(serve.process.pid).children(recursive=True)
        assert any("server" in " ".join(c.cmdline()) for c in children), serve.text()
        serve.process.send_signal(sig)
        assert serve.process.wait(30) == 0, serve.text()
    finally:
        serve.stop(signal.SIGKILL)
    _gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, [c.cmdline() for c in alive]
    assert "Traceback" not in serve.text()


def test_gateway_sigterm_publishes_records_and_closes_its_session(
    tmp_path: Path, worker_env: dict[str, str]
) -> None:
    plane, base = start_control_plane(worker_env, tmp_path / "g.duckdb", tmp_path / "api.log")
    config = {
        "name": "sigterm",
        "primary": {"name": "prod", "kind": "simulated", "simulate": {"ttft_ms": 5, "itl_ms": 1}},
        "regions": ["sig-shadow"],
        "sample_rate": 0,
    }
    (tmp_path / "gateway.yaml").write_text(yaml.safe_dump(config))
    port = free_port()
    gateway = _spawn(
        ["api", "gateway", "--config", str(tmp_path / "gateway.yaml"), "--port", str(port),
         "--server", base, "--wait-for-workers", "--drain-s", "1"],
        tmp_path / "gateway.log",
        {**worker_env, "TOKENBENCH_TOKEN": API_TOKEN},
    )  # fmt: skip
    api = httpx.Client(base_url=base, headers={"authorization": f"Bearer {API_TOKEN}"})
    try:
        _wait(lambda: _healthy(f"http://127.0.0.1:{port}/gateway/health"), 60, "gateway")
        session = httpx.get(f"http://127.0.0.1:{port}/gateway/health").json()["session"]
        children = psutil.Process(gateway.process.pid).children(recursive=True)
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        for _ in range(5):
            answer = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body)
            assert answer.status_code == 200, answer.text
        gateway.process.send_signal(signal.SIGTERM)
        assert gateway.process.wait(60) == 0, gateway.text()

        def stopped() -> bool:
            return bool(api.get(f"/v1/shadow-sessions/{session}").json()["state"] != "running")

        _wait(stopped, 60, "session stop")
        summary = api.get(f"/v1/shadow-sessions/{session}").json()
    finally:
        api.close()
        gateway.stop(signal.SIGKILL)
        plane.stop()
    assert summary["state"] == "finished", summary
    assert summary["records"].get("primary") == 5, summary
    assert summary["requests_captured"] == 5, summary
    _gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, [c.cmdline() for c in alive]


def test_worker_sigterm_mid_shard_flushes_and_the_shard_runs_again(
    tmp_path: Path, redis_server: RedisServer, worker_env: dict[str, str]
) -> None:
    env = {**worker_env, "TOKENBENCH__WORKER__HEARTBEAT_S": "1"}
    region = "sigterm"
    workers = [start_worker(region, env, tmp_path / f"w{i}.log", redis_server.url) for i in (0, 1)]
    db = tmp_path / "w.duckdb"
    plane, base = start_control_plane(env, db, tmp_path / "api.log")
    client = redis.Redis.from_url(redis_server.url)
    try:
        with httpx.Client(base_url=base, headers={"authorization": f"Bearer {API_TOKEN}"}) as api:
            run_id = api.post("/v1/runs", json={"scenario": scenario(region, 60, [2])}).json()["id"]
            view = wait_for_view(api, run_id, lambda v: v["requests_done"] >= 6, timeout_s=120)
            shard_id = view["stages"][0]["shards"][0]["shard_id"]
            owner = client.get(owner_key(run_id, shard_id))
            assert owner is not None
            beat = client.get(heartbeat_key(region, owner.decode()))
            assert beat is not None
            victim = next(w for w in workers if w.process.pid == json.loads(beat)["pid"])
            children = psutil.Process(victim.process.pid).children(recursive=True)
            assert children, "the worker runs a simulated endpoint"

            victim.process.send_signal(signal.SIGTERM)
            assert victim.process.wait(60) == 0, victim.text()[-3000:]
            _gone, alive = psutil.wait_procs(children, timeout=10)
            assert not alive, [c.cmdline() for c in alive]
            final = wait_for_view(api, run_id, lambda v: v["state"] != "running", timeout_s=180)
            assert final["state"] == "finished", final
    finally:
        plane.stop()
        for worker in workers:
            worker.stop(signal.SIGQUIT)
    con = duckdb.connect(str(db), read_only=True)
    seqs = con.execute(
        "SELECT seq FROM requests WHERE run_id = ? ORDER BY seq", [run_id]
    ).fetchall()
    assert [s for (s,) in seqs] == list(range(60))
    attempts = con.execute(
        "SELECT attempt, state, records FROM shard_attempts WHERE run_id = ? ORDER BY attempt",
        [run_id],
    ).fetchall()
    assert [(a, s) for a, s, _ in attempts] == [(1, "abandoned"), (2, "finished")], attempts
    # What the stopped attempt recorded was published before the worker exited (kept apart).
    flushed = con.execute(
        "SELECT count(*) FROM request_records WHERE run_id = ? AND attempt = 1", [run_id]
    ).fetchone()
    assert flushed is not None and flushed[0] >= 6
