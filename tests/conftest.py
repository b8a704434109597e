"""Fixtures that start real parts on free loopback ports: Redis, workers, endpoints."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from typer.testing import CliRunner

from api.cli.app import main
from api.local.redis_server import RedisServer, free_port, start_redis_server
from scenarios.wire.contract import heartbeat_pattern
from tests.support.polls import wait_for_view, wait_until
from tests.support.tiers import (  # the hooks that split, order and parallelise the suite
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_configure_node,
    pytest_ignore_collect,
    pytest_runtest_protocol,
    pytest_unconfigure,
    pytest_xdist_auto_num_workers,
)

REPO = Path(__file__).resolve().parent.parent
__all__ = [
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_configure_node",
    "pytest_ignore_collect",
    "pytest_runtest_protocol",
    "pytest_unconfigure",
    "pytest_xdist_auto_num_workers",
]


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A private Redis-compatible server for the whole session."""
    server = start_redis_server()
    yield server
    server.stop()


@dataclass
class Proc:
    """A subprocess started by a fixture, with its log file."""

    process: subprocess.Popen[bytes]
    log: Path

    def stop(self, sig: int = 15) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def text(self) -> str:
        return self.log.read_text(errors="replace")


def _spawn(args: list[str], log: Path, env: dict[str, str]) -> Proc:
    with log.open("wb") as handle:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(
            [sys.executable, "-m", "api", *args],
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=REPO,
        )
    return Proc(process, log)


@pytest.fixture(scope="session")
def worker_env(redis_server: RedisServer) -> dict[str, str]:
    """Environment pointing tokenbench processes at the session's Redis; test endpoints
    live on loopback, so the egress policy allows it."""
    return {
        **os.environ,
        "TOKENBENCH__REDIS__URL": redis_server.url,
        "TOKENBENCH__EGRESS__ALLOW_LOOPBACK": "true",
    }


@pytest.fixture(scope="session")
def eu_worker(
    redis_server: RedisServer, worker_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Proc]:
    """A real Celery worker process consuming region 'eu'."""
    log = tmp_path_factory.mktemp("worker") / "worker-eu.log"
    env = {
        **worker_env,
        "TEST_PROVIDER_KEY": "sk-test-secret-0123456789abcdef",
        # The test endpoints live on loopback: the key may be sent there, nowhere else.
        "TOKENBENCH__WORKER__SECRET_HOSTS": '{"TEST_PROVIDER_KEY": ["http://127.0.0.1:*"]}',
    }
    proc = _spawn(["worker", "--processes", "1", "--region", "eu"], log, env)
    client = redis.Redis.from_url(redis_server.url)
    wait_until(
        lambda: (
            proc.process.poll() is not None
            or next(iter(client.scan_iter(match=heartbeat_pattern("eu"))), None) is not None
        ),
        60,
        "eu worker",
    )
    assert proc.process.poll() is None, proc.text()
    yield proc
    proc.stop(3)  # SIGQUIT: cold shutdown


def start_worker(region: str, env: dict[str, str], log: Path, redis_url: str) -> Proc:
    """A real `tokenbench worker` process for ``region``, returned once it heartbeats
    (one process: tests kill and signal it as the worker itself)."""
    proc = _spawn(["worker", "--processes", "1", "--region", region], log, env)
    client = redis.Redis.from_url(redis_url)
    wait_until(
        lambda: (
            proc.process.poll() is not None
            or next(iter(client.scan_iter(match=heartbeat_pattern(region))), None) is not None
        ),
        60,
        f"{region} worker",
    )
    assert proc.process.poll() is None, proc.text()
    return proc


@pytest.fixture(scope="session")
def us_worker(
    redis_server: RedisServer, worker_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Proc]:
    """A real Celery worker process consuming region 'us'."""
    log = tmp_path_factory.mktemp("worker") / "worker-us.log"
    proc = start_worker("us", worker_env, log, redis_server.url)
    yield proc
    proc.stop(3)


API_TOKEN = "test-token-5f2c"
# Team quotas and the request rate out of the way of tests about other things (a test's
# own ``env`` overrides them: tests/integration/api/test_leases.py, tests/security/test_quotas.py).
QUIET_QUOTAS = {
    "TOKENBENCH__TEAMS__MAX_CONCURRENT_RUNS": "1000",
    "TOKENBENCH__TEAMS__REQUESTS_PER_S": "10000",
    "TOKENBENCH__TEAMS__REQUEST_BURST": "100000",
}


def start_control_plane(env: dict[str, str], db: Path, log: Path) -> tuple[Proc, str]:
    """`tokenbench serve` on a free port; returns it and its base URL once healthy."""
    port = free_port()
    api_env = {**QUIET_QUOTAS, **env, "TOKENBENCH__API__TOKENS": f'["{API_TOKEN}"]'}
    proc = _spawn(["serve", "--port", str(port), "--db", str(db)], log, api_env)
    base = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        if proc.process.poll() is not None:
            raise RuntimeError(proc.text())
        try:
            return httpx.get(f"{base}/healthz", timeout=0.5).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(healthy, 60, "control plane")
    return proc, base


@pytest.fixture(scope="session")
def simulate_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., str]]:
    """Factory: start `tokenbench simulate` with options; returns its base URL."""
    procs: list[Proc] = []

    def start(**options: float | int | str | bool) -> str:
        port = free_port()
        args = ["simulate", "--port", str(port)]
        for name, value in options.items():
            flag = f"--{name.replace('_', '-')}"
            if isinstance(value, bool):  # a switch: --prefix-cache / --no-prefix-cache
                args.append(flag if value else f"--no-{name.replace('_', '-')}")
            else:
                args += [flag, str(value)]
        log = tmp_path_factory.mktemp("simulate") / "simulate.log"
        proc = _spawn(args, log, dict(os.environ))
        procs.append(proc)
        base = f"http://127.0.0.1:{port}"

        def healthy() -> bool:
            try:
                return httpx.get(f"{base}/health", timeout=0.5).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(healthy, 30, "simulated endpoint")
        return f"{base}/v1"

    yield start
    for proc in procs:
        proc.stop()


def wait_for_run(client: httpx.Client, run_id: str, timeout_s: float = 120) -> dict[str, Any]:
    """The run's view (GET /v1/runs/{id}) once it is no longer running (nor queued)."""
    return wait_for_view(
        client, run_id, lambda view: view["state"] not in ("running", "queued"), timeout_s
    )


@dataclass
class CliResult:
    """Outcome of one `tokenbench` command."""

    code: int
    stdout: str
    stderr: str


@pytest.fixture
def tokenbench() -> Callable[..., CliResult]:
    """Run `python -m api ARGS` (the tokenbench CLI) in a subprocess."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 240) -> CliResult:
        done = subprocess.run(
            [sys.executable, "-m", "api", *args],
            capture_output=True,
            text=True,
            env=env if env is not None else dict(os.environ),
            cwd=REPO,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        return CliResult(done.returncode, done.stdout, done.stderr)

    return run


@pytest.fixture
def tokenbench_in_process() -> Callable[..., CliResult]:
    """Run the tokenbench CLI (``api.cli.app.main``, as the console script does) in this
    process: for tests of what a command prints and exits with, where the process
    boundary is not what is tested; it costs no interpreter start. ``env`` is laid over
    this process's environment while the command runs (None removes a variable)."""

    def run(*args: str, env: dict[str, str | None] | None = None) -> CliResult:
        runner = CliRunner()
        argv = sys.argv
        with runner.isolation(env=env) as (stdout, stderr, _):
            sys.argv = ["tokenbench", *args]
            try:
                main()
                code = 0
            except SystemExit as exit_:
                code = (
                    exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
                )
            finally:
                sys.argv = argv
            out, err = stdout.getvalue(), stderr.getvalue()
        return CliResult(code, out.decode(), err.decode())

    return run
