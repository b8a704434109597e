"""Endpoint leases measured: two runs on one target back to back, two on two targets at once.

    python benchmarks/leases.py [--requests 40] [--ttft-ms 40] [--itl-ms 5]

Starts Redis, two standalone simulated endpoints (`tokenbench simulate`, the targets A
and B), one worker process and `tokenbench serve`, then submits two runs on target A
one right after the other (the second is ``queued`` behind the first) and two runs on A
and B together. For each run it prints its state at submission, its queue position, and
its records' time span (first request sent → last request ended, from
``GET /v1/runs/{id}/records``); for each pair, the overlap of the two spans (negative: the
gap between them). The 1-minute load average before and after is printed too: the
machine is shared, so the spans' lengths vary, never their order.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
from processes import spawn, wait_http
from rich.console import Console
from rich.table import Table

from api.local.redis_server import free_port, start_redis_server

TOKEN = "bench-token"
REGION = "leases"


def scenario(endpoint: str, requests: int) -> dict[str, Any]:
    """One OpenAI-compatible provider at ``endpoint``, one stream, ``requests`` requests."""
    return {
        "name": "leases",
        "providers": [{"name": "target", "kind": "openai", "base_url": endpoint, "model": "m"}],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 8},
                    "output_tokens": {"dist": "fixed", "value": 16},
                }
            ]
        },
        "load": {"concurrency": [1], "requests_per_level": requests},
        "regions": [REGION],
    }


def submit(client: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    answer = client.post("/v1/runs", json={"scenario": body}).raise_for_status()
    return dict(answer.json())


def wait_done(client: httpx.Client, run_id: str) -> str:
    while (state := client.get(f"/v1/runs/{run_id}").json()["state"]) in ("running", "queued"):
        time.sleep(0.1)
    return str(state)


def span(client: httpx.Client, run_id: str) -> tuple[dt.datetime, dt.datetime]:
    """First request sent, last request ended."""
    content = client.get(f"/v1/runs/{run_id}/records").raise_for_status().content
    table = pa.ipc.open_stream(content).read_all()
    return min(table.column("sent_at").to_pylist()), max(table.column("end_at").to_pylist())


def pair(
    client: httpx.Client, first_url: str, second_url: str, requests: int
) -> list[tuple[dict[str, Any], tuple[dt.datetime, dt.datetime]]]:
    """Submit two runs one right after the other; their answers and spans once done."""
    created = [submit(client, scenario(url, requests)) for url in (first_url, second_url)]
    for run in created:
        wait_done(client, run["id"])
    return [(run, span(client, run["id"])) for run in created]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--ttft-ms", type=float, default=40)
    parser.add_argument("--itl-ms", type=float, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tokenbench-leases-"))
    server = start_redis_server()
    env = {
        **os.environ,
        "TOKENBENCH__REDIS__URL": server.url,
        "TOKENBENCH__EGRESS__ALLOW_LOOPBACK": "true",
        "TOKENBENCH__API__TOKENS": f'["{TOKEN}"]',
    }
    procs = []
    load_before = os.getloadavg()[0]
    try:
        ports = {"a": free_port(), "b": free_port()}
        latency = ["--ttft-ms", str(args.ttft_ms), "--itl-ms", str(args.itl_ms)]
        for name, port in ports.items():
            procs.append(spawn(["simulate", "--port", str(port), *latency], env, work / name))
        procs.append(spawn(["worker", "--processes", "1", "--region", REGION], env, work / "w"))
        api_port = free_port()
        db = str(work / "bench.duckdb")
        procs.append(spawn(["serve", "--port", str(api_port), "--db", db], env, work / "api"))
        for port in ports.values():
            wait_http(f"http://127.0.0.1:{port}/health")
        wait_http(f"http://127.0.0.1:{api_port}/healthz")
        time.sleep(3)  # the worker heartbeats
        url = {name: f"http://127.0.0.1:{port}/v1" for name, port in ports.items()}
        with httpx.Client(
            base_url=f"http://127.0.0.1:{api_port}",
            headers={"authorization": f"Bearer {TOKEN}"},
            timeout=60,
        ) as client:
            same = pair(client, url["a"], url["a"], args.requests)
            different = pair(client, url["a"], url["b"], args.requests)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(15)
        server.stop()
    table = Table(title=f"endpoint leases ({args.requests} requests per run, one stream)")
    for column in ("pair", "run", "at submit", "position", "first sent", "last ended", "span s"):
        table.add_column(column)
    table.add_column("overlap s", justify="right")
    for label, runs in (("one target (A, A)", same), ("two targets (A, B)", different)):
        (_, (start_1, end_1)), (_, (start_2, end_2)) = runs
        overlap = (min(end_1, end_2) - max(start_1, start_2)).total_seconds()
        for index, (run, (start, end)) in enumerate(runs):
            queue = run.get("queue") or {}
            table.add_row(
                label if index == 0 else "",
                run["id"],
                run["state"],
                str(queue.get("position", "")),
                start.strftime("%H:%M:%S.%f")[:-3],
                end.strftime("%H:%M:%S.%f")[:-3],
                f"{(end - start).total_seconds():.2f}",
                f"{overlap:+.2f}" if index == 0 else "",
            )
    console = Console(width=160)
    console.print(table)
    console.print(
        f"load average (1 min): {load_before:.2f} before, {os.getloadavg()[0]:.2f} after; "
        "overlap < 0 is the gap between the two spans"
    )


if __name__ == "__main__":
    main()
