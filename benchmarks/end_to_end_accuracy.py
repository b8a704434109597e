"""TTFT error of a whole ``tokenbench run`` (embedded Redis, worker, DuckDB) against the
server's own stamps, at 256 and 1,000 streams, before and after the tail work of issue 14.

Run: ``python benchmarks/end_to_end_accuracy.py`` (``--help`` for options).

The endpoint is ``tests/fakes/sse_server.py`` in its own process (TTFT 50 ms, ITL 20 ms,
64 tokens): it stamps when it parsed each request and when it wrote its first token and
serves both at ``GET /requests``, keyed by a hash of the prompt. Each variant runs the
real command line, ``tokenbench run --target ... --concurrency N --requests 3N``, into a
fresh DuckDB file; the benchmark plans every request of the stage the way the workers
did (``workers.prompts.plan``, from the scenario the run saved), joins the stored records to
the server's stamps by prompt hash and reports client TTFT − server TTFT. Variants are
set by settings environment variables, so "before" is the same code with the issue-14
changes switched off: ``TOKENBENCH__WORKER__PREWARM=false`` and
``TOKENBENCH__WORKER__GC_TUNING=false``. CPU seconds are those of the whole command
(control plane, Redis, worker) as its children were reaped; the endpoint is excluded.
Target (issue 14, on a quiet machine): p50 ≤ 2 ms; p99 ≤ 10 ms at 256, ≤ 25 ms at 1,000.

``--profile DIR`` records the worker process of each run with py-spy (``pip install
py-spy``), writing ``DIR/<variant>-<streams>.txt`` (collapsed stacks).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scenarios.loader import load_scenario
from tests.fakes.sse_server import READY_PREFIX, prompt_key
from workers.prompts.plan import request_planner

VARIANTS: dict[str, dict[str, str]] = {
    "before": {"TOKENBENCH__WORKER__PREWARM": "false", "TOKENBENCH__WORKER__GC_TUNING": "false"},
    "prewarm": {"TOKENBENCH__WORKER__PREWARM": "true", "TOKENBENCH__WORKER__GC_TUNING": "false"},
    "after": {"TOKENBENCH__WORKER__PREWARM": "true", "TOKENBENCH__WORKER__GC_TUNING": "true"},
}


@contextmanager
def sse_server(ttft_ms: float, itl_ms: float) -> Iterator[str]:
    """The stamping endpoint in its own process; yields its base URL."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.fakes.sse_server",
            "--port",
            "0",
            "--ttft-ms",
            str(ttft_ms),
            "--itl-ms",
            str(itl_ms),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith(READY_PREFIX):
            raise RuntimeError(f"endpoint did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line[len(READY_PREFIX) :])}"
    finally:
        process.terminate()
        process.wait(10)


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def worker_pid(parent: int) -> int | None:
    """The worker process below ``tokenbench run`` (its command line names the worker)."""
    ps = ["ps", "-eo", "pid,ppid,args"]
    out = subprocess.run(ps, capture_output=True, text=True, check=False).stdout
    for line in out.splitlines()[1:]:
        pid, ppid, args = line.strip().split(None, 2)
        if int(ppid) == parent and " worker " in f" {args} ":
            return int(pid)
    return None


def run_once(
    url: str, variant: str, streams: int, rounds: int, tokens: int, work: Path,
    profile: Path | None,
) -> dict[str, Any]:  # fmt: skip
    """One ``tokenbench run``; the joined errors and the run's client health."""
    db = work / f"{variant}-{streams}.duckdb"
    saved = work / f"{variant}-{streams}.yaml"
    report_path = work / f"{variant}-{streams}.json"
    env = {**os.environ, **VARIANTS[variant], "COLUMNS": "200"}
    env.pop("TOKENBENCH__REDIS__URL", None)
    command = [
        str(Path(sys.executable).with_name("tokenbench")), "run", "--target", url,
        "--model", "fake", "--concurrency", str(streams), "--requests", str(rounds * streams),
        "--prompt-tokens", "32", "--output-tokens", str(tokens), "--db", str(db),
        "--save", str(saved), "--format", "json", "-o", str(report_path),
    ]  # fmt: skip
    cpu_before = children_cpu_s()
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    spy = None
    if profile is not None:
        spy = start_profile(process.pid, profile / f"{variant}-{streams}.txt")
    _, stderr = process.communicate(timeout=900)
    wall_s = time.perf_counter() - started
    cpu_s = children_cpu_s() - cpu_before
    if spy is not None:
        spy.wait(30)
    if process.returncode != 0:
        return {"failed": stderr.decode(errors="replace")[-300:]}
    with urllib.request.urlopen(f"{url}/requests", timeout=30) as answer:
        server: dict[str, dict[str, int]] = json.loads(answer.read())
    scenario = load_scenario(saved)
    plan = request_planner(scenario.workload, scenario.seed, 0)
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT seq, ttft_ns, epoch_ns(sent_at), epoch_ns(first_token_at) FROM requests "
            "WHERE status = 'ok' AND ttft_ns IS NOT NULL"
        ).fetchall()
    errors, outbound, inbound = [], [], []
    for seq, ttft_ns, sent_at, first_at in rows:
        stamps = server.get(prompt_key(plan(seq).prompt))
        if stamps is not None:
            errors.append((ttft_ns - stamps["ttft_ns"]) / 1e6)
            # The error's two halves, by wall clock (one machine; the conversions of the
            # two processes' monotonic stamps to wall clock differ by microseconds).
            outbound.append((stamps["arrived_at_ns"] - sent_at) / 1e6)
            inbound.append((first_at - stamps["first_token_at_ns"]) / 1e6)
    report = json.loads(report_path.read_text())
    health = [s.get("client_health") or {} for s in report.get("stages", [])]
    return {
        "requests": len(rows),
        "joined": len(errors),
        "errors_ms": np.array(errors),
        "outbound_ms": np.array(outbound),
        "inbound_ms": np.array(inbound),
        "cpu_s": cpu_s,
        "wall_s": wall_s,
        "prewarmed": sum(int(h.get("prewarmed_connections") or 0) for h in health),
        "prewarm_ms": max((float(h.get("prewarm_ms") or 0) for h in health), default=0.0),
        "gc_collections": sum(int(h.get("gc_collections") or 0) for h in health),
        "gc_pause_max_ms": max((float(h.get("gc_pause_max_ms") or 0) for h in health), default=0),
        "loop_lag_p99_ms": max((float(h.get("loop_lag_p99_ms") or 0) for h in health), default=0),
        "schedule_lag_p99_ms": max(
            (float(h.get("schedule_lag_p99_ms") or 0) for h in health), default=0.0
        ),
        "client_bound": any(bool(h.get("client_bound")) for h in health),
    }


def start_profile(parent: int, out: Path) -> subprocess.Popen[bytes] | None:
    """py-spy on the worker once it exists (collapsed stacks until it exits)."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        print("py-spy not installed: no profile", file=sys.stderr)
        return None
    deadline = time.monotonic() + 30
    while (pid := worker_pid(parent)) is None and time.monotonic() < deadline:
        time.sleep(0.1)
    if pid is None:
        return None
    return subprocess.Popen(
        [
            spy,
            "record",
            "--pid",
            str(pid),
            "--format",
            "raw",
            "--rate",
            "250",
            "--threads",
            "--output",
            str(out),
            "--nonblocking",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def quantiles(errors: Any) -> list[str]:
    """p50, p99 and max of the errors (ms), signed."""
    if not len(errors):
        return ["-", "-", "-"]
    return [f"{np.percentile(errors, p):+.1f}" for p in (50, 99, 100)]


def halves(values: Any) -> str:
    """p50 / p99 of one half of the error (ms)."""
    if not len(values):
        return "-"
    return f"{np.percentile(values, 50):+.1f} / {np.percentile(values, 99):+.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[256, 1000])
    parser.add_argument(
        "--variants", nargs="+", choices=list(VARIANTS), default=["before", "after"]
    )
    parser.add_argument("--rounds", type=int, default=3, help="requests per stream")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--ttft-ms", type=float, default=50.0)
    parser.add_argument("--itl-ms", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=1, help="runs of each variant")
    parser.add_argument("--profile", type=Path, default=None, help="py-spy output folder")
    args = parser.parse_args()
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    console = Console(width=200, stderr=True)
    timing = f"TTFT {args.ttft_ms:.0f} ms, ITL {args.itl_ms:.0f} ms, {args.tokens} tokens"
    table = Table(title=f"end to end: tokenbench run vs the server's stamps ({timing})")
    for name in ("streams", "variant", "ok req", "joined", "TTFT err p50", "p99", "max",
                 "sent→parsed p50/p99", "written→stamped p50/p99", "CPU s", "wall s",
                 "prewarmed", "prewarm ms", "GC n", "GC max ms",
                 "loop lag p99", "sched lag p99", "client-bound", "load avg"):  # fmt: skip
        table.add_column(name, justify="left" if name == "variant" else "right")
    with tempfile.TemporaryDirectory(prefix="tb-e2e-") as tmp:
        for streams in args.streams:
            for repeat in range(args.repeat):
                for variant in args.variants:
                    console.print(f"[dim]{variant} × {streams} streams (#{repeat + 1}) ...[/dim]")
                    with sse_server(args.ttft_ms, args.itl_ms) as url:
                        work = Path(tmp) / f"r{repeat}"
                        work.mkdir(exist_ok=True)
                        row = run_once(url, variant, streams, args.rounds, args.tokens, work,
                                       args.profile)  # fmt: skip
                    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
                    if "failed" in row:
                        reason = re.sub(r"\s+", " ", row["failed"])[-80:]
                        table.add_row(str(streams), variant, "-", reason, *["-"] * 14, load)
                        continue
                    errors = row["errors_ms"]
                    table.add_row(
                        str(streams), variant, str(row["requests"]), str(row["joined"]),
                        *quantiles(errors),
                        halves(row["outbound_ms"]),
                        halves(row["inbound_ms"]),
                        f"{row['cpu_s']:.1f}", f"{row['wall_s']:.1f}", str(row["prewarmed"]),
                        f"{row['prewarm_ms']:.0f}", str(row["gc_collections"]),
                        f"{row['gc_pause_max_ms']:.1f}", f"{row['loop_lag_p99_ms']:.1f}",
                        f"{row['schedule_lag_p99_ms']:.1f}", str(row["client_bound"]), load,
                    )  # fmt: skip
    Console(width=260).print(table)
    print("TTFT error = client TTFT (stored record) − server TTFT (first token written − request "
          "parsed), ms; CPU s = tokenbench run's whole process tree")  # fmt: skip
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
