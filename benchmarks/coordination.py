"""Coordination: one control plane and one Redis driving 64 worker processes of tiny shards.

    python benchmarks/coordination.py [--regions 8] [--processes 8] [--repeat 3]

Starts a private Redis, one ``tokenbench simulate`` endpoint (5 ms TTFT, 1 ms ITL),
``tokenbench serve`` and, per region, ``tokenbench worker --processes N --concurrency 4``
(8 regions × 8 processes = 64 worker processes by default), all on loopback. Then it
submits runs of one stage whose shards send one 4-token request each: one shard per
worker process (64), then four (256). Printed per size (median and max of
``--repeat`` runs): POST /v1/runs → first request sent, → every shard's first request sent
(all shards running), → run finished; shards started per second; the control plane's CPU
per shard (its process's CPU from the POST to the end of the run, polling included, over
the shards); the distinct worker processes that ran them; and the load average. Then, with the stack
stopped, it times the DuckDB statements of one shard's lifecycle on the same file, which
the control loop runs one after the other.
Wall-clock instants are compared on one machine (the records' ``sent_at`` and this
script's clock).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil
import pyarrow as pa
import redis
from control_plane import scenario, spawn, wait_http
from rich.console import Console
from rich.table import Table

from analytics.store.db import connect
from analytics.store.ingest import BatchMessage, ingest_batches
from analytics.store.runs import PlannedShard, RunStore
from api.local.redis_server import free_port, start_redis_server
from scenarios.model import Scenario
from scenarios.wire.contract import heartbeat_pattern
from scenarios.wire.records import batch_to_ipc, records_to_batch
from workers.client.result import RequestResult
from workers.prompts.plan import PlannedRequest
from workers.shard.rows import RowContext, record_row

TOKEN = "bench-token"
POLL_S = 0.2


def run_once(client: httpx.Client, body: dict[str, Any], plane: psutil.Process) -> dict[str, float]:
    cpu0 = sum(plane.cpu_times()[:2])
    posted = time.time()
    answer = client.post("/v1/runs", json={"scenario": body}).raise_for_status().json()
    run_id, shards = answer["id"], answer["shards"]
    while client.get(f"/v1/runs/{run_id}").json()["state"] == "running":
        time.sleep(POLL_S)
    finished = time.time()
    cpu = sum(plane.cpu_times()[:2]) - cpu0
    table = pa.ipc.open_stream(client.get(f"/v1/runs/{run_id}/records").content).read_all()
    sent = [t.timestamp() for t in table.column("sent_at").to_pylist()]
    workers = set(table.column("worker").to_pylist())
    return {
        "shards": shards,
        "first_s": min(sent) - posted,
        "all_s": max(sent) - posted,
        "finished_s": finished - posted,
        "cpu_per_shard_s": cpu / shards,
        "workers": len(workers),
        "records": len(sent),
    }


def duckdb_per_shard(db: Path, shards: int) -> dict[str, float]:
    """CPU seconds of the DuckDB statements one shard's lifecycle costs the control loop,
    timed on the benchmark's own file after its runs (so on a database of that size): the
    run's creation (per shard), dispatch, start, one 1-record batch ingested, end, settle."""
    scenario_doc = scenario(1, ["r0"], "http://127.0.0.1:9/v1")
    parsed = Scenario.model_validate(scenario_doc)
    con = connect(db)
    store = RunStore(con)
    run_id = f"timing-{time.time_ns()}"
    ids = [f"s0.p{i}.r0" for i in range(shards)]
    times: dict[str, float] = {}

    def timed(name: str, action: Callable[[], object]) -> None:
        # CPU of this process, every thread (DuckDB's included): what the control
        # plane's process would spend, whatever else the machine runs.
        start = time.process_time()
        action()
        times[name] = times.get(name, 0.0) + (time.process_time() - start) / shards

    planned = [PlannedShard(i, 0, f"p{n}", "r0", 1, 1) for n, i in enumerate(ids)]
    timed("create", lambda: store.create_run(run_id, parsed, planned))
    sent = time.time_ns()
    for n, shard_id in enumerate(ids):
        ctx = RowContext(run_id, 0, shard_id, 1, f"p{n}", "m", "r0", "w", "closed", 1)
        result = RequestResult(
            intended_start=sent, sent=sent, first_byte=sent + 1_000_000,
            first_token=sent + 5_000_000, first_output_token=sent + 5_000_000,
            last_token=sent + 8_000_000, end=sent + 9_000_000,
            token_stamps=[sent + 5_000_000 + k * 1_000_000 for k in range(4)],
            prompt_tokens=8, completion_tokens=4, token_count_source="usage",
        )  # fmt: skip
        row = record_row(ctx, PlannedRequest(0, 8, 4, "p"), result)
        ipc = batch_to_ipc(records_to_batch([row]))
        timed("dispatch", lambda s=shard_id: store.shard_dispatched(run_id, s, 1))
        timed("start", lambda s=shard_id: store.attempt_started(run_id, s, 1, "w"))
        message = [BatchMessage(run_id, shard_id, 1, 0, ipc)]
        timed("ingest", lambda m=message: ingest_batches(con, m))
        timed("end", lambda s=shard_id: store.attempt_ended(run_id, s, 1, "finished", 1, 1, None))
        timed("settle", lambda s=shard_id: store.shard_done(run_id, s, "finished", 1, None))
    con.close()
    return times


def wait_workers(url: str, regions: list[str], per_region: int, timeout_s: float) -> None:
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + timeout_s
    while True:
        live = {r: sum(1 for _ in client.scan_iter(match=heartbeat_pattern(r))) for r in regions}
        if all(n >= per_region for n in live.values()):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"worker processes alive per region: {live}")
        time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--regions", type=int, default=8)
    parser.add_argument("--processes", type=int, default=8, help="worker processes per region")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    regions = [f"r{i}" for i in range(args.regions)]
    total = args.regions * args.processes
    work = Path(tempfile.mkdtemp(prefix="tokenbench-coord-"))
    server = start_redis_server()
    env = {
        **os.environ,
        "TOKENBENCH__REDIS__URL": server.url,
        "TOKENBENCH__EGRESS__ALLOW_LOOPBACK": "true",
        "TOKENBENCH__API__TOKENS": f'["{TOKEN}"]',
    }
    procs = []
    console = Console(width=200)
    rows: list[tuple[int, list[dict[str, float]]]] = []
    try:
        sim_port, api_port = free_port(), free_port()
        procs.append(
            spawn(
                ["simulate", "--port", str(sim_port), "--ttft-ms", "5", "--itl-ms", "1"],
                env,
                work / "sim.log",
            )
        )
        procs.append(
            spawn(
                ["serve", "--port", str(api_port), "--db", str(work / "coord.duckdb")],
                env,
                work / "api.log",
            )
        )
        wait_http(f"http://127.0.0.1:{sim_port}/health", timeout_s=300)
        wait_http(f"http://127.0.0.1:{api_port}/healthz", timeout_s=300)
        started = time.monotonic()
        for region in regions:
            procs.append(
                spawn(
                    [
                        "worker",
                        "--region",
                        region,
                        "--processes",
                        str(args.processes),
                        "--concurrency",
                        "4",
                    ],
                    env,
                    work / f"{region}.log",
                )
            )
        wait_workers(server.url, regions, args.processes, timeout_s=900)
        console.print(
            f"[dim]{total} worker processes alive after {time.monotonic() - started:.0f} s"
        )
        time.sleep(5)  # let the start-up burst settle
        plane = psutil.Process(procs[1].pid)
        endpoint = f"http://127.0.0.1:{sim_port}/v1"
        with httpx.Client(
            base_url=f"http://127.0.0.1:{api_port}",
            headers={"authorization": f"Bearer {TOKEN}"},
            timeout=120,
        ) as client:
            for per_process in (1, 4):
                providers = args.processes * per_process
                body = scenario(providers, regions, endpoint, "coordination")
                rows.append(
                    (per_process, [run_once(client, body, plane) for _ in range(args.repeat)])
                )
        load = os.getloadavg()
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
        server.stop()
    table = Table(
        title=(
            f"coordination: one control plane, one Redis, {total} worker processes "
            f"({args.regions} regions × {args.processes}), median (max) of {args.repeat} runs, "
            f"{psutil.cpu_count()} CPUs"
        )
    )
    for name in ("shards", "per process", "POST → first sent", "POST → all running",
                 "POST → finished", "shards started/s", "control CPU/shard", "processes used",
                 "records"):  # fmt: skip
        table.add_column(name, justify="right")
    for per_process, runs in rows:

        def cell(key: str, runs: list[dict[str, float]] = runs) -> str:
            values = [r[key] * 1000 for r in runs]
            return f"{statistics.median(values):.0f} ({max(values):.0f}) ms"

        shards = runs[0]["shards"]
        rate = statistics.median(r["shards"] / r["all_s"] for r in runs)
        table.add_row(
            f"{shards:.0f}",
            str(per_process),
            cell("first_s"),
            cell("all_s"),
            cell("finished_s"),
            f"{rate:.0f}",
            cell("cpu_per_shard_s"),
            f"{min(r['workers'] for r in runs):.0f}–{max(r['workers'] for r in runs):.0f}",
            f"{min(r['records'] for r in runs):.0f}",
        )
    console.print(table)
    console.print(f"load average at the end (1, 5, 15 min): {load}")
    costs = duckdb_per_shard(work / "coord.duckdb", 256)
    shutil.rmtree(work, ignore_errors=True)
    parts = ", ".join(f"{name} {seconds * 1000:.1f}" for name, seconds in costs.items())
    total_ms = sum(costs.values()) * 1000
    console.print(
        f"DuckDB statements of one shard's lifecycle on this file (CPU ms, mean of 256): "
        f"{parts}; total {total_ms:.1f} ms, so at most {1000 / total_ms:.0f} shards/s on a core "
        f"(load average {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    main()
