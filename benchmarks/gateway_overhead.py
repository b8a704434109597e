"""Latency the shadow gateway adds on the primary path, direct vs through the gateway.

    python benchmarks/gateway_overhead.py [--requests 300] [--concurrency 1 16]

Starts a private Redis, `tokenbench serve`, one `tokenbench simulate` endpoint (the
primary) and `python -m api gateway` in front of it, all on loopback. The gateway
samples *every* request (sample_rate 1, messages stored) into a region with no worker,
so each request pays for sampling, the task hand-off and the capture: the worst case.
Tasks pile up in the region's queue until the backlog bound drops them, as in an outage.

At each concurrency the same closed-loop client (the workers' own measurement code)
runs against the primary directly and through the gateway, alternating in short rounds
so both see the same machine load. Reported: client-side TTFT and E2E percentiles of
both paths and their difference, and the gateway's own time before forwarding (its
records' schedule lag: request fully read → upstream send begins).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow as pa
import yaml
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from api.local.redis_server import free_port, start_redis_server  # noqa: E402
from workers.client.adapters.openai_chat import ChatParser, chat_body  # noqa: E402
from workers.client.http import make_client  # noqa: E402
from workers.client.result import RequestResult  # noqa: E402
from workers.client.streaming import HttpCall, Limits, json_headers, measure_request  # noqa: E402
from workers.prompts import PlannedRequest  # noqa: E402

TOKEN = "bench-token"
ROUND = 20  # requests per path before switching to the other one


def spawn(module: str, args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", module, *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )


def wait_http(url: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=0.5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(url)


async def measure(
    http: httpx.AsyncClient, base: str, requests: int, concurrency: int
) -> list[RequestResult]:
    call = HttpCall(
        "POST",
        f"{base}/chat/completions",
        json_headers("sk-bench"),
        chat_body("simulated", PlannedRequest(0, 6, 16, "a short prompt of a few words")),
    )
    limits = Limits(60, 30, 10)
    results: list[RequestResult] = []
    remaining = requests

    async def user() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            start = time.perf_counter_ns()
            results.append(await measure_request(http, call, ChatParser, limits, None, 8, start))

    await asyncio.gather(*(user() for _ in range(concurrency)))
    return results


def ms(values: list[int]) -> np.ndarray[Any, Any]:
    return np.asarray(values, dtype=float) / 1e6


async def run_level(
    direct: str, gateway: str, requests: int, concurrency: int
) -> dict[str, dict[str, np.ndarray[Any, Any]]]:
    http = make_client()
    paths: dict[str, list[RequestResult]] = {"direct": [], "gateway": []}
    await measure(http, direct, concurrency * 2, concurrency)  # warm connections
    await measure(http, gateway, concurrency * 2, concurrency)
    per_round = max(ROUND, concurrency * 4)
    done = 0
    while done < requests:
        for name, base in (("direct", direct), ("gateway", gateway)):
            paths[name] += await measure(http, base, per_round, concurrency)
        done += per_round
    await http.aclose()
    out = {}
    for name, results in paths.items():
        ok = [r for r in results if r.ok and r.first_token is not None and r.end is not None]
        assert len(ok) == len(results), f"{name}: {len(results) - len(ok)} failed requests"
        out[name] = {
            "ttft": ms([r.first_token - r.sent for r in ok]),  # type: ignore[operator]
            "e2e": ms([r.end - r.sent for r in ok]),  # type: ignore[operator]
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300, help="per path and level")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument(
        "--sample-rate", type=float, default=1.0, help="share mirrored (1: every request)"
    )
    parser.add_argument("--ttft-ms", type=float, default=50, help="the primary's TTFT")
    parser.add_argument(
        "--itl-ms", type=float, default=10, help="the primary's inter-token gap (100 tok/s)"
    )
    args = parser.parse_args()
    console = Console()
    redis = start_redis_server()
    tmp = Path(tempfile.mkdtemp(prefix="tb-gateway-bench-"))
    env = {
        **os.environ,
        "TOKENBENCH__REDIS__URL": redis.url,
        "TOKENBENCH__API__TOKENS": f'["{TOKEN}"]',
        "TOKENBENCH_TOKEN": TOKEN,
        "TOKENBENCH__EGRESS__ALLOW_LOOPBACK": "true",
    }
    procs: list[subprocess.Popen[bytes]] = []
    try:
        api_port, sim_port, gw_port = free_port(), free_port(), free_port()
        procs.append(
            spawn(
                "api",
                ["serve", "--port", str(api_port), "--db", str(tmp / "b.duckdb")],
                env,
                tmp / "api.log",
            )
        )
        procs.append(
            spawn(
                "api",
                [
                    *("simulate", "--port", str(sim_port)),
                    *("--ttft-ms", str(args.ttft_ms), "--itl-ms", str(args.itl_ms)),
                ],
                env,
                tmp / "sim.log",
            )
        )
        wait_http(f"http://127.0.0.1:{api_port}/healthz")
        wait_http(f"http://127.0.0.1:{sim_port}/health")
        direct = f"http://127.0.0.1:{sim_port}/v1"
        config = {
            "name": "bench",
            "primary": {"name": "prod", "kind": "openai", "base_url": direct, "model": "simulated"},
            "shadows": [{"name": "cand", "kind": "simulated"}],
            "sample_rate": args.sample_rate,
            "regions": ["nobody"],
            "privacy": {"store_text": True},
        }
        (tmp / "gateway.yaml").write_text(yaml.safe_dump(config))
        procs.append(
            spawn(
                "api",
                [
                    "gateway",
                    *("--config", str(tmp / "gateway.yaml"), "--port", str(gw_port)),
                    *("--server", f"http://127.0.0.1:{api_port}", "--wait-for-workers"),
                ],
                env,
                tmp / "gateway.log",
            )
        )
        wait_http(f"http://127.0.0.1:{gw_port}/gateway/health")
        gateway = f"http://127.0.0.1:{gw_port}/v1"
        session = httpx.get(f"http://127.0.0.1:{gw_port}/gateway/health").json()["session"]

        table = Table(
            title=f"gateway overhead on the primary path (loopback, ms; primary TTFT "
            f"{args.ttft_ms:g} ms, ITL {args.itl_ms:g} ms, 16 tokens)"
        )
        for header in ("concurrency", "metric", "path", "n", "p50", "p99"):
            table.add_column(header, justify="right")
        for level in args.concurrency:
            figures = asyncio.run(run_level(direct, gateway, args.requests, level))
            for metric in ("ttft", "e2e"):
                d, g = figures["direct"][metric], figures["gateway"][metric]
                for name, values in (("direct", d), ("gateway", g)):
                    p50, p99 = np.percentile(values, [50, 99])
                    table.add_row(
                        str(level), metric, name, str(len(values)), f"{p50:.2f}", f"{p99:.2f}"
                    )
                added = np.percentile(g, [50, 99]) - np.percentile(d, [50, 99])
                table.add_row(
                    str(level),
                    metric,
                    "[bold]added[/bold]",
                    "",
                    f"{added[0]:+.2f}",
                    f"{added[1]:+.2f}",
                    end_section=metric == "e2e",
                )
        time.sleep(1.5)  # the gateway publishes its records every 0.5 s
        stats = httpx.get(f"http://127.0.0.1:{gw_port}/gateway/stats").json()
        records = httpx.get(
            f"http://127.0.0.1:{api_port}/v1/runs/{session}/records",
            headers={"authorization": f"Bearer {TOKEN}"},
        )
        lag = pa.ipc.open_stream(records.content).read_all().column("schedule_lag_ms").to_numpy()
        p50, p99 = np.percentile(lag, [50, 99])
        table.add_row("all", "forward", "gateway's own", str(len(lag)), f"{p50:.3f}", f"{p99:.3f}")
        console.print(table)
        shadow = stats["shadow"]
        console.print(
            f"samples handed off {shadow['offered']}, enqueued {shadow['sent']}, dropped: "
            f"full {shadow['dropped_full']}, backlog {shadow['dropped_backlog']}, "
            f"errors {shadow['send_errors']}"
        )
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        redis.stop()


if __name__ == "__main__":
    main()
