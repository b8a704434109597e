"""Scale-out: aggregate token events/s and TTFT error with 1, 2 and 4 worker processes.

    python benchmarks/scale_out.py [--processes 1 2 4] [--streams 1000] [--duration 20]

Each configuration is one whole ``tokenbench run`` (its embedded Redis, control plane
and ``TOKENBENCH__WORKER__PROCESSES=N`` worker processes, so the stage is split into N
parts) against the same loopback endpoint, one process of ``tests/fakes/sse_server.py``
(50 ms TTFT, then 64 tokens at 20 ms, pre-encoded, one timer for all streams). Printed
side by side: the parts and the distinct worker processes that ran them, token events/s
over the run (all requests' token events / first send to last end), the speed-up over the
first configuration, TTFT error against the endpoint's 50 ms (p50 / p99 of requests sent
after ``--warmup``), how late the endpoint itself was (p99), CPU (1.0 = one core) of the
worker processes, of the control plane (the run process), of Redis and of the endpoint
while the stage ran (first send to last end), the run's client-bound verdict, and the
highest 1-minute load average while the stage ran.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import psutil
import yaml
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
TTFT_MS, ITL_MS, TOKENS = 50.0, 20.0, 64
READY = "SSE_SERVER_READY port="


class CpuSampler:
    """CPU seconds per role (workers, control, Redis) of a process tree, sampled with
    their wall-clock time until stopped, and the load average at each sample."""

    def __init__(self, root: psutil.Process, period_s: float = 0.25) -> None:
        self.root = root
        self.period_s = period_s
        self.cpu: dict[int, tuple[str, float]] = {}
        self.samples: list[tuple[float, dict[str, float]]] = []
        self.load: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.load.append(os.getloadavg()[0])
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
            for proc in procs:
                try:
                    times = proc.cpu_times()
                    role = _role(proc.cmdline())
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                self.cpu[proc.pid] = (role, times.user + times.system)
            roles: dict[str, float] = {}
            for role, seconds in self.cpu.values():
                roles[role] = roles.get(role, 0.0) + seconds
            self.samples.append((time.time(), roles))

    def cores(self, start: float, end: float) -> dict[str, float]:
        """Cores used per role between two wall-clock instants (the samples nearest
        inside them)."""
        inside = [(t, roles) for t, roles in self.samples if start <= t <= end]
        if len(inside) < 2:
            return {}
        (t0, first), (t1, last) = inside[0], inside[-1]
        return {role: (last[role] - first.get(role, 0.0)) / (t1 - t0) for role in last}

    def load_between(self, start: float, end: float) -> float:
        """Highest 1-minute load average sampled between two instants."""
        loads = [
            load for (t, _), load in zip(self.samples, self.load, strict=False) if start <= t <= end
        ]
        return max(loads, default=os.getloadavg()[0])


def _role(cmdline: list[str]) -> str:
    text = " ".join(cmdline)
    if " worker" in text:
        return "workers"
    if "redis" in text or "valkey" in text or "server" in text.split()[0]:
        return "redis"
    return "control"


def start_endpoint() -> tuple[subprocess.Popen[bytes], str]:
    args = [sys.executable, "-m", "tests.fakes.sse_server", "--port", "0",
            "--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS)]  # fmt: skip
    process = subprocess.Popen(args, stdout=subprocess.PIPE, cwd=REPO)
    assert process.stdout is not None
    line = process.stdout.readline().decode().strip()
    if not line.startswith(READY):
        raise RuntimeError(f"endpoint did not start: {line!r}")
    return process, f"http://127.0.0.1:{int(line.removeprefix(READY))}"


def scenario(base: str, streams: int, duration_s: float) -> dict[str, Any]:
    return {
        "name": f"scale-out-{streams}",
        "providers": [{"name": "sse", "kind": "openai", "base_url": f"{base}/v1", "model": "fake"}],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 32},
                    "output_tokens": {"dist": "fixed", "value": TOKENS},
                }
            ]
        },
        "load": {"concurrency": [streams], "duration_s": duration_s},
    }


def run_once(
    processes: int, base: str, endpoint: psutil.Process, args: argparse.Namespace, work: Path
) -> dict[str, Any]:
    path = work / f"p{processes}.yaml"
    path.write_text(yaml.safe_dump(scenario(base, args.streams, args.duration)))
    db = work / f"p{processes}.duckdb"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH__")}
    env["TOKENBENCH__WORKER__PROCESSES"] = str(processes)
    urllib.request.urlopen(f"{base}/stats").read()  # reset the endpoint's lateness figures
    run = subprocess.Popen(
        [sys.executable, "-m", "api", "run", str(path), "--db", str(db), "--format", "json"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    with CpuSampler(psutil.Process(run.pid)) as sampler, CpuSampler(endpoint) as served:
        out, _ = run.communicate(timeout=args.duration * 10 + 300)
    with urllib.request.urlopen(f"{base}/stats") as answer:
        late = json.loads(answer.read())
    report = json.loads(out[out.index(b"{") :])
    con = duckdb.connect(str(db), read_only=True)
    try:
        start, end, events, requests = con.execute(
            "SELECT epoch(min(sent_at)), epoch(max(end_at)), sum(token_events), count(*) "
            "FROM requests WHERE status = 'ok'"
        ).fetchone() or (0.0, 0.0, 0, 0)
        span = end - start
        ttft = np.array(
            [
                row[0]
                for row in con.execute(
                    "SELECT ttft_ms FROM requests WHERE status = 'ok' AND sent_at >= "
                    "(SELECT min(sent_at) FROM requests) + to_microseconds(?::BIGINT)",
                    [int(args.warmup * 1e6)],
                ).fetchall()
            ]
        )
        (parts, workers) = con.execute(
            "SELECT count(DISTINCT shard_id), count(DISTINCT worker) FROM shard_attempts"
        ).fetchone() or (0, 0)
        errors = con.execute("SELECT count(*) FROM requests WHERE status <> 'ok'").fetchone()
    finally:
        con.close()
    roles = sampler.cores(start, end)
    stage = report["stages"][0]
    err = ttft - TTFT_MS
    return {
        "processes": processes,
        "parts": parts,
        "workers": workers,
        "requests": requests,
        "errors": errors[0] if errors else 0,
        "events_per_s": events / span if span else 0.0,
        "ttft_err_p50": float(np.percentile(err, 50)) if err.size else float("nan"),
        "ttft_err_p99": float(np.percentile(err, 99)) if err.size else float("nan"),
        "server_late_p99": float(late["p99_ms"]),
        "cpu_workers": roles.get("workers", 0.0),
        "cpu_control": roles.get("control", 0.0),
        "cpu_redis": roles.get("redis", 0.0),
        "cpu_endpoint": sum(served.cores(start, end).values()),
        "client_bound": stage.get("client_bound"),
        "load": sampler.load_between(start, end),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    args = parser.parse_args()
    console = Console(width=220)
    rows = []
    endpoint, base = start_endpoint()
    try:
        with tempfile.TemporaryDirectory(prefix="tokenbench-scale-") as work:
            for processes in args.processes:
                console.print(f"[dim]{processes} worker process(es) × {args.streams} streams")
                rows.append(
                    run_once(processes, base, psutil.Process(endpoint.pid), args, Path(work))
                )
    finally:
        endpoint.terminate()
        endpoint.wait(10)
    table = Table(
        title=(
            f"scale-out: one tokenbench run, {args.streams} streams for {args.duration:.0f} s, "
            f"{TTFT_MS:.0f} ms TTFT + {TOKENS} tokens at {ITL_MS:.0f} ms "
            f"({psutil.cpu_count()} CPUs)"
        )
    )
    for name in ("processes", "parts", "workers used", "requests", "errors", "token events/s",
                 "× first", "TTFT err p50", "TTFT err p99", "server late p99", "CPU workers",
                 "CPU control", "CPU Redis", "CPU endpoint", "client-bound",
                 "load avg (max)"):  # fmt: skip
        table.add_column(name, justify="right")
    first = rows[0]["events_per_s"] or 1.0
    for row in rows:
        table.add_row(
            str(row["processes"]),
            str(row["parts"]),
            str(row["workers"]),
            f"{row['requests']:,}",
            str(row["errors"]),
            f"{row['events_per_s']:,.0f}",
            f"{row['events_per_s'] / first:.2f}×",
            f"{row['ttft_err_p50']:+.1f} ms",
            f"{row['ttft_err_p99']:+.1f} ms",
            f"{row['server_late_p99']:.1f} ms",
            f"{row['cpu_workers']:.2f}",
            f"{row['cpu_control']:.2f}",
            f"{row['cpu_redis']:.2f}",
            f"{row['cpu_endpoint']:.2f}",
            str(row["client_bound"]),
            f"{row['load']:.2f}",
        )
    console.print(table)
    console.print(f"load average now (1, 5, 15 min): {os.getloadavg()}")


if __name__ == "__main__":
    main()
