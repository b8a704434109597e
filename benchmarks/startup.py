"""Start-up time of the command line: what a user waits for before anything happens.

Median wall time of ``--runs`` runs (default 10) of each case, each a fresh process:

- ``python -c pass``: the floor, the interpreter alone;
- ``tokenbench --help``;
- ``tokenbench validate scenarios/examples/quickstart.yaml``;
- a worker ready to consume: ``tokenbench worker --processes 1`` started against a
  private Redis until it reports ready (the pipe ``TOKENBENCH_READY_FD`` names,
  workers/runtime/worker_main.py), then stopped with SIGTERM.

With ``--baseline VENV`` (e.g. the venv of a checkout of main) each case is also timed
with that install, the runs of the two interleaved so that the machine's load falls on
both alike; the load average is printed before and after.

Usage: python benchmarks/startup.py [--runs 10] [--baseline /path/to/main/.venv] [--no-worker]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from api.local.redis_server import start_redis_server

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "scenarios" / "examples" / "quickstart.yaml"
READY_TIMEOUT_S = 120.0


def _timed(command: list[str]) -> float:
    """Seconds from spawn to exit of ``command`` (its output discarded; it must succeed)."""
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def _worker_ready(tokenbench: str, redis_url: str) -> float:
    """Seconds from spawn until a worker process says it consumes its queue."""
    read_end, write_end = os.pipe()
    env = {
        **os.environ,
        "TOKENBENCH__REDIS__URL": redis_url,
        "TOKENBENCH_READY_FD": str(write_end),
    }
    start = time.perf_counter()
    worker = subprocess.Popen(
        [tokenbench, "worker", "--region", "startup-bench", "--processes", "1"],
        env=env,
        pass_fds=(write_end,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb") as ready:
            said = ready.readline()  # the worker's pid, once ready; b"" if it died
        elapsed = time.perf_counter() - start
        if not said:
            raise RuntimeError(f"the worker exited before it was ready (code {worker.poll()})")
        return elapsed
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=READY_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


def _cases(venv: Path, redis_url: str | None) -> dict[str, Callable[[], float]]:
    python, tokenbench = str(venv / "bin" / "python"), str(venv / "bin" / "tokenbench")
    cases: dict[str, Callable[[], float]] = {
        "python -c pass (floor)": lambda: _timed([python, "-c", "pass"]),
        "tokenbench --help": lambda: _timed([tokenbench, "--help"]),
        "tokenbench validate quickstart.yaml": lambda: _timed(
            [tokenbench, "validate", str(QUICKSTART)]
        ),
    }
    if redis_url is not None:
        cases["worker ready to consume"] = lambda: _worker_ready(tokenbench, redis_url)
    return cases


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--baseline", type=Path, help="another install's venv, timed alike")
    parser.add_argument("--no-worker", action="store_true", help="skip the worker case")
    args = parser.parse_args()
    installs = {"this": Path(sys.prefix)}
    if args.baseline is not None:
        installs = {"baseline": args.baseline, **installs}
    redis = None if args.no_worker else start_redis_server()
    redis_url = None if redis is None else f"redis://127.0.0.1:{redis.port}/0"
    load_before = _load()
    times: dict[tuple[str, str], list[float]] = {}
    try:
        plans = {name: _cases(venv, redis_url) for name, venv in installs.items()}
        for case in plans["this"]:
            for _ in range(args.runs):
                for name, cases in plans.items():  # interleaved: the same load on both
                    times.setdefault((case, name), []).append(cases[case]())
    finally:
        if redis is not None:
            redis.stop()
    load_after = _load()
    table = Table(title=f"start-up, median of {args.runs} runs (s)")
    table.add_column("case")
    for name, venv in installs.items():
        table.add_column(f"{name} ({venv})", justify="right")
    for case in plans["this"]:
        table.add_row(case, *(f"{statistics.median(times[(case, name)]):.3f}" for name in installs))
    console = Console()
    console.print(table)
    console.print(f"load average (1 5 15 min): before {load_before}, after {load_after}")


if __name__ == "__main__":
    main()
