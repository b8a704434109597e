"""Control-plane latency: POST /v1/runs → first request sent, and fan-out of 128 shards
(32 providers, the most a scenario may name, × 4 regions).

    python benchmarks/control_plane.py [--repeat 5]

Starts a private Redis, one `tokenbench simulate` endpoint, four regional workers and
`tokenbench serve`, all on loopback, and prints a table. Wall-clock instants are compared
on one machine (the records' `sent_at` and this script's clock).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
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
REGIONS = ["r0", "r1", "r2", "r3"]
FANOUT_PROVIDERS = 32  # the most a scenario may name (scenarios/limits.py)


def scenario(
    providers: int, regions: list[str], endpoint: str, name: str = "fanout"
) -> dict[str, Any]:
    """Providers × regions shards of one tiny request each (8 prompt, 4 output tokens)."""
    return {
        "name": f"{name}-{providers * len(regions)}",
        "providers": [
            {"name": f"p{i}", "kind": "openai", "base_url": endpoint, "model": "simulated"}
            for i in range(providers)
        ],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 8},
                    "output_tokens": {"dist": "fixed", "value": 4},
                }
            ]
        },
        "load": {"concurrency": [1], "requests_per_level": 1},
        "regions": regions,
    }


def run_once(client: httpx.Client, body: dict[str, Any]) -> tuple[float, float]:
    """Seconds from POST to the first request sent, and to the last shard's first send."""
    posted = time.time()
    run_id = client.post("/v1/runs", json={"scenario": body}).raise_for_status().json()["id"]
    while client.get(f"/v1/runs/{run_id}").json()["state"] == "running":
        time.sleep(0.05)
    table = pa.ipc.open_stream(client.get(f"/v1/runs/{run_id}/records").content).read_all()
    sent = [t.timestamp() for t in table.column("sent_at").to_pylist()]
    return min(sent) - posted, max(sent) - posted


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tokenbench-bench-"))
    server = start_redis_server()
    env = {
        **os.environ,
        "TOKENBENCH__REDIS__URL": server.url,
        "TOKENBENCH__EGRESS__ALLOW_LOOPBACK": "true",
        "TOKENBENCH__API__TOKENS": f'["{TOKEN}"]',
    }
    procs = []
    try:
        sim_port, api_port = free_port(), free_port()
        procs.append(
            spawn(
                ["simulate", "--port", str(sim_port), "--ttft-ms", "5", "--itl-ms", "1"],
                env,
                work / "sim.log",
            )
        )
        for region in REGIONS:
            procs.append(
                spawn(
                    ["worker", "--processes", "1", "--region", region, "--concurrency", "16"],
                    env,
                    work / f"{region}.log",
                )
            )
        procs.append(
            spawn(
                ["serve", "--port", str(api_port), "--db", str(work / "bench.duckdb")],
                env,
                work / "api.log",
            )
        )
        wait_http(f"http://127.0.0.1:{sim_port}/health")
        wait_http(f"http://127.0.0.1:{api_port}/healthz")
        time.sleep(3)  # workers heartbeat
        endpoint = f"http://127.0.0.1:{sim_port}/v1"
        with httpx.Client(
            base_url=f"http://127.0.0.1:{api_port}",
            headers={"authorization": f"Bearer {TOKEN}"},
            timeout=60,
        ) as client:
            single = [
                run_once(client, scenario(1, ["r0"], endpoint))[0] for _ in range(args.repeat)
            ]
            fanout = [
                run_once(client, scenario(FANOUT_PROVIDERS, REGIONS, endpoint))
                for _ in range(args.repeat)
            ]
        table = Table(
            title=f"control plane latency (median of {args.repeat}, 2-core machine, loopback)"
        )
        table.add_column("measure")
        table.add_column("median", justify="right")
        table.add_column("max", justify="right")
        table.add_row(
            "POST /v1/runs → first request sent (1 shard)",
            f"{statistics.median(single) * 1000:.0f} ms",
            f"{max(single) * 1000:.0f} ms",
        )
        first = [f for f, _ in fanout]
        last = [last for _, last in fanout]
        table.add_row(
            f"{FANOUT_PROVIDERS * len(REGIONS)} shards: POST → first request sent",
            f"{statistics.median(first) * 1000:.0f} ms",
            f"{max(first) * 1000:.0f} ms",
        )
        table.add_row(
            f"{FANOUT_PROVIDERS * len(REGIONS)} shards: POST → every shard's first request sent",
            f"{statistics.median(last) * 1000:.0f} ms",
            f"{max(last) * 1000:.0f} ms",
        )
        Console().print(table)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        server.stop()


if __name__ == "__main__":
    main()
