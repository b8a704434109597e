"""``tokenbench worker --processes N`` as real processes on a real Redis: N workers that
heartbeat, a killed one started again, a start-up failure ending the supervisor with the
child's code instead of a restart loop, and SIGTERM/SIGINT passed on to every worker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from api.local.redis_server import RedisServer
from scenarios.wire.contract import heartbeat_pattern
from tests.conftest import REPO, Proc
from workers.runtime.worker_processes import EARLY_EXIT_S, Supervisor

pytestmark = pytest.mark.integration


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.1)


def beating_pids(client: redis.Redis, region: str) -> set[int]:
    """Pids of the region's workers whose heartbeat key is current."""
    pids = set()
    for key in client.scan_iter(match=heartbeat_pattern(region)):
        payload = client.get(key)
        if payload is not None:
            pids.add(int(json.loads(payload)["pid"]))
    return pids


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def supervisor(region: str, env: dict[str, str], log: Path, *extra: str) -> Proc:
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "api", "worker", "--region", region, *extra],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=REPO,
        )  # fmt: skip
    return Proc(process, log)


def test_a_killed_worker_process_is_started_again(
    redis_server: RedisServer, worker_env: dict[str, str], tmp_path: Path
) -> None:
    region = f"sup-{uuid.uuid4().hex[:6]}"
    client = redis.Redis.from_url(redis_server.url)
    proc = supervisor(region, worker_env, tmp_path / "sup.log", "--processes", "2")
    try:
        wait_until(lambda: len(beating_pids(client, region)) == 2, "two worker processes")
        first = beating_pids(client, region)
        # Each child started before its first beat: past this, its death is no start-up
        # failure and it is restarted.
        time.sleep(EARLY_EXIT_S + 1)
        victim = min(first)
        os.kill(victim, signal.SIGKILL)
        wait_until(
            lambda: bool(beating_pids(client, region) - first), "a new process", timeout_s=120
        )
        assert proc.process.poll() is None, proc.text()
        survivor = (first - {victim}).pop()
        assert alive(survivor)  # the others were left alone
        assert "exited with code 137" in proc.text() and "starting it again" in proc.text()
    finally:
        proc.stop(signal.SIGTERM)
    assert proc.process.returncode == 0, proc.text()


def test_a_process_dying_at_start_ends_the_supervisor_with_its_code() -> None:
    failing = [sys.executable, "-c", "import sys; sys.exit(3)"]
    assert Supervisor(failing, processes=2).run() == 3


def test_a_bad_option_exits_once_not_in_a_loop(worker_env: dict[str, str], tmp_path: Path) -> None:
    proc = supervisor("badopt", worker_env, tmp_path / "sup.log", "--processes", "2",
                      "--loglevel", "NOPE")  # fmt: skip
    code = proc.process.wait(120)
    text = proc.text()
    assert code == 1, text
    assert "'NOPE' is not one of" in text
    assert "before it was ready: stopping the others, not restarting" in text
    assert "starting it again" not in text


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_is_passed_on_and_every_worker_stops_gracefully(
    sig: signal.Signals, redis_server: RedisServer, worker_env: dict[str, str], tmp_path: Path
) -> None:
    region = f"sig-{uuid.uuid4().hex[:6]}"
    client = redis.Redis.from_url(redis_server.url)
    proc = supervisor(region, worker_env, tmp_path / "sup.log", "--processes", "2")
    try:
        wait_until(lambda: len(beating_pids(client, region)) == 2, "two worker processes")
        pids = beating_pids(client, region)
        proc.process.send_signal(sig)
        assert proc.process.wait(60) == 0, proc.text()
    finally:
        proc.stop(signal.SIGKILL)
    assert not any(alive(pid) for pid in pids)
    # Each worker removed its own heartbeat: a warm shutdown, not a kill (whose key
    # would stay until it expires).
    assert not list(client.scan_iter(match=heartbeat_pattern(region)))
    assert proc.text().count("Warm shutdown") == 2
