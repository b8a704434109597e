"""CPU per token event: a whole worker, its measurement client, and a raw client's floor.

Run: ``python benchmarks/worker_cpu.py`` (``--help`` for options; about a minute).

Three rows, side by side in one run, each against a fresh ``tests/fakes/sse_server.py``
in its own process (50 ms TTFT, then ``--tokens`` token events 20 ms apart, every
stream closed-loop), so the endpoint's CPU is never counted:

- ``raw floor``: ``benchmarks/raw_client.py``, asyncio (uvloop) and httptools on one
  connection per stream, events counted by their blank lines: the least CPU a Python
  client of the same loop and parser spends per token event.
- ``client``: the measurement client in a process of its own
  (``benchmarks/client_common.py``: the real OpenAI chat adapter, arrival transport,
  closed loop and shard health, the garbage collector tuned as a worker tunes it).
- ``worker``: ``tokenbench run`` (embedded Redis, worker, DuckDB) with one closed-loop
  stage of ``--streams`` streams: the CPU of the worker process tree (the Celery
  worker and its children; the control plane and Redis excluded) over the stage's
  window, divided by the token events it recorded (``token_events`` of the stage's
  rows in the DuckDB file): prompt making, records, Arrow batches and publishing
  included.

CPU time, not wall time, so the machine's other load matters far less; the load
average is printed beside the table all the same. The issue's target: the worker at
≤ 10 µs of CPU per token event at 1,000 streams.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import psutil
from client_common import machine, process_endpoint, run_child
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
TOKENBENCH = str(Path(sys.executable).with_name("tokenbench"))
TTFT_MS, ITL_MS = 50.0, 20.0
SERVER = [sys.executable, "-m", "tests.fakes.sse_server", "--port", "0",
          "--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS)]  # fmt: skip


def raw_floor(url: str, streams: int, seconds: float, tokens: int) -> dict[str, Any]:
    """The raw client's figures (its own process)."""
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "raw_client.py"), "--url", url,
         "--streams", str(streams), "--duration", str(seconds), "--tokens", str(tokens)],
        capture_output=True, text=True, timeout=seconds * 5 + 60, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        return {"failed": done.stderr[-300:]}
    row: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return row


def client_only(url: str, streams: int, seconds: float, tokens: int) -> dict[str, Any]:
    """The measurement client's figures (``client_common.py``, its own process)."""
    row = run_child(url, "httpx-arrival", streams, seconds, tokens, TTFT_MS, ITL_MS, 0.0)
    if "failed" in row:
        return row
    events = row["events_per_s"] * row["wall_s"]
    return {"events": events, "wall_s": row["wall_s"], "cpu_s": row["cpu"] * row["wall_s"],
            "cpu_us_per_event": row["cpu_us_per_event"]}  # fmt: skip


class TreeCpu:
    """Samples the CPU seconds of every worker process under ``parent`` (by command
    line), every ``period_s``, with the wall clock of each sample."""

    def __init__(self, parent: psutil.Process, period_s: float = 0.1) -> None:
        self.parent = parent
        self.period_s = period_s
        self.samples: list[tuple[float, float]] = []  # (epoch s, CPU s so far)
        self._seen: dict[int, float] = {}  # pid -> its last CPU seconds (gone ones kept)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                children = self.parent.children(recursive=True)
            except psutil.Error:
                continue
            for child in children:
                try:
                    if any("worker" in part for part in child.cmdline()):
                        times = child.cpu_times()
                        self._seen[child.pid] = times.user + times.system
                except psutil.Error:
                    continue
            self.samples.append((time.time(), sum(self._seen.values())))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def between(self, start: float, end: float) -> float:
        """CPU seconds spent between two epoch times (samples nearest inside them)."""
        inside = [cpu for t, cpu in self.samples if start <= t <= end]
        return inside[-1] - inside[0] if len(inside) >= 2 else float("nan")


def whole_worker(url: str, streams: int, seconds: float, tokens: int) -> dict[str, Any]:
    """``tokenbench run``'s worker: CPU over the stage window per recorded token event."""
    with tempfile.TemporaryDirectory() as work:
        db = Path(work) / "cpu.duckdb"
        env = {k: v for k, v in os.environ.items() if k != "TOKENBENCH__REDIS__URL"}
        command = [TOKENBENCH, "run", "--target", url, "--model", "fake",
                   "--concurrency", str(streams), "--duration", str(seconds),
                   "--requests", "10000000", "--prompt-tokens", "32",
                   "--output-tokens", str(tokens), "--db", str(db), "--format", "json",
                   "-o", os.devnull]  # fmt: skip
        process = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        sampler = TreeCpu(psutil.Process(process.pid))
        _, stderr = process.communicate(timeout=seconds * 6 + 180)
        sampler.stop()
        if process.returncode != 0:
            return {"failed": stderr.decode(errors="replace")[-300:]}
        with duckdb.connect(str(db), read_only=True) as con:
            row = con.execute(
                "SELECT epoch_ns(min(sent_at)), epoch_ns(max(end_at)), sum(token_events)"
                " FROM requests"
            ).fetchone()
    assert row is not None
    start, end, events = row[0] / 1e9, row[1] / 1e9, int(row[2])
    cpu_s = sampler.between(start, end)
    # The window's samples are 0.1 s apart: the events recorded in that stretch are
    # the stage's events times the sampled share of its window.
    inside = [t for t, _ in sampler.samples if start <= t <= end]
    share = (inside[-1] - inside[0]) / (end - start) if len(inside) >= 2 else float("nan")
    counted = events * share
    return {"events": events, "wall_s": end - start, "cpu_s": cpu_s,
            "cpu_us_per_event": cpu_s / counted * 1e6 if counted else float("nan")}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--rows", nargs="+", default=["raw", "client", "worker"],
                        choices=["raw", "client", "worker"])  # fmt: skip
    args = parser.parse_args()
    # Each stream holds a socket: let the children open what they need (they inherit it).
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    console = Console(stderr=True)
    table = Table(
        title=f"CPU per token event, {args.streams} streams "
        f"({TTFT_MS:.0f} ms TTFT, {args.tokens} tokens at {ITL_MS:.0f} ms)"
    )
    for name in ("row", "token events", "events/s", "CPU (cores)", "µs/event", "× floor",
                 "load"):  # fmt: skip
        table.add_column(name, justify="left" if name == "row" else "right")
    runs = {"raw": ("raw floor", raw_floor), "client": ("client", client_only),
            "worker": ("worker", whole_worker)}  # fmt: skip
    floor: float | None = None
    for key in args.rows:
        label, run = runs[key]
        with process_endpoint(SERVER, "SSE_SERVER_READY port=") as url:
            console.print(f"[dim]{label} × {args.streams} streams ...[/dim]")
            row = run(url, args.streams, args.duration, args.tokens)
        load = f"{os.getloadavg()[0]:.1f}"
        if "failed" in row:
            table.add_row(label, "-", "-", "-", "-", "-", load)
            console.print(f"[red]{label} failed:[/red] {row['failed']}")
            continue
        per_event = row["cpu_us_per_event"]
        if key == "raw":
            floor = per_event
        table.add_row(
            label,
            f"{row['events']:,.0f}",
            f"{row['events'] / row['wall_s']:,.0f}",
            f"{row['cpu_s'] / row['wall_s']:.2f}",
            f"{per_event:.1f}",
            f"{per_event / floor:.1f}" if floor else "-",
            load,
        )
    Console().print(table)
    Console().print(f"machine: {machine()}")


if __name__ == "__main__":
    main()
