"""api/cli/commands/serve.py as a real process: ``serve`` on the Redis the settings name (no
embedded one), its DuckDB file where ``--db`` says, every request refused while no token
is configured, SIGTERM a clean exit 0; ``worker`` refuses to start without a broker.
(``serve`` with its embedded Redis: tests/faults/test_signals.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from api.cli.commands import serve
from api.local.redis_server import RedisServer, free_port
from tests.conftest import REPO, Proc

pytestmark = pytest.mark.integration


def _environment(**settings: str) -> dict[str, str]:
    """This environment without any tokenbench setting, plus ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH")}
    return env | settings


def _healthy(base: str, proc: Proc) -> None:
    deadline = time.monotonic() + 60
    while True:
        assert proc.process.poll() is None, proc.text()
        try:
            if httpx.get(f"{base}/healthz", timeout=0.5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, proc.text()
        time.sleep(0.1)


def test_serve_uses_the_configured_redis_and_refuses_all_without_tokens(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    port, db, log = free_port(), tmp_path / "served.duckdb", tmp_path / "serve.log"
    env = _environment(TOKENBENCH__REDIS__URL=redis_server.url)
    with log.open("wb") as handle:
        process = subprocess.Popen(
            [sys.executable, "-m", "api", serve.serve.__name__, "--port", str(port), "--db", str(db)],
            stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=REPO,
        )  # fmt: skip
    proc = Proc(process, log)
    try:
        base = f"http://127.0.0.1:{port}"
        _healthy(base, proc)
        assert db.exists()  # the control plane's database is where --db says
        ready = httpx.get(f"{base}/readyz", timeout=10).json()
        assert ready["redis"] is True and ready["duckdb"] is True
        refused = httpx.get(f"{base}/v1/runs", headers={"authorization": "Bearer anything"})
        assert refused.status_code == 401
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, proc.text()
    finally:
        proc.stop(signal.SIGKILL)
    text = proc.text()
    assert "TOKENBENCH__API__TOKENS is empty: every API request will be refused" in text
    assert "embedded Redis" not in text
