"""Shared by the benchmarks that start a stack: a tokenbench process with its output in
a log file, and waiting for an HTTP endpoint to answer 200."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent


def spawn(
    args: list[str], env: dict[str, str], log: Path, module: str = "api"
) -> subprocess.Popen[bytes]:
    """``python -m MODULE ARGS`` from the repository, stdout and stderr into ``log``."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", module, *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )


def wait_http(url: str, timeout_s: float = 60) -> None:
    """Return once ``url`` answers 200; TimeoutError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=0.5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(url)


def stop_all(procs: list[subprocess.Popen[bytes]], timeout_s: float = 20) -> None:
    """Terminate ``procs`` in reverse start order, then wait; kill what outlives it."""
    for proc in reversed(procs):
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
