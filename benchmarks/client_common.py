"""Shared by the client benchmarks: one measured closed-loop run in a fresh process.

A child process (``python benchmarks/client_common.py --url ... --streams N``) plays one
worker process: it builds the chosen httpx client, runs N closed-loop streams through
the real OpenAI chat adapter for ``--duration`` seconds and prints one JSON line of
figures. Running each configuration in its own process keeps one run's connections,
garbage and CPU time out of the next one's numbers.

TTFT and ITL errors are steady-state figures: requests sent in the first ``--warmup``
seconds (the first round opens every connection at once, a burst a run's ``warmup_s``
excludes too) are left out, and ``ttft_err_p99_all_ms`` gives the p99 over all requests
beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402
import numpy as np  # noqa: E402
import psutil  # noqa: E402

from scenarios.workload.spec import FixedLength, MixClass, Workload  # noqa: E402
from tests.fakes.load_harness import chat_adapter  # noqa: E402
from workers.client.http import UNBOUNDED, make_client  # noqa: E402
from workers.load.closed_loop import ClosedLoop, RequestSource  # noqa: E402
from workers.prompts.plan import request_planner  # noqa: E402
from workers.runtime import gc_tuning  # noqa: E402
from workers.runtime.event_loop import new_loop  # noqa: E402
from workers.shard.health import ShardHealth  # noqa: E402

CLIENTS = (
    "httpx-default",
    "httpx-unbounded",
    "httpx-aiohttp-100",
    "httpx-aiohttp",
    "httpx-arrival",
)


def make_http(name: str) -> httpx.AsyncClient:
    """The client configurations compared (docs/load.md)."""
    if name == "httpx-default":
        return httpx.AsyncClient()  # pool of 100 connections, httpx's own transport
    if name == "httpx-unbounded":
        return httpx.AsyncClient(limits=UNBOUNDED)
    if name == "httpx-aiohttp-100":
        return make_client("aiohttp-100")  # the previous default: aiohttp's 100 cap
    if name == "httpx-aiohttp":
        return make_client("aiohttp")  # no connection cap; chunks stamped when read
    if name == "httpx-arrival":
        return make_client("arrival")  # the default: chunks stamped in data_received
    raise ValueError(name)


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    workload = Workload(
        mix=[
            MixClass(
                prompt_tokens=FixedLength(dist="fixed", value=32),
                output_tokens=FixedLength(dist="fixed", value=args.tokens),
            )
        ]
    )
    adapter = chat_adapter(args.url)
    ttft, ttft_all, itl, events, ok, errors = [], [], [], 0, 0, {}
    health = ShardHealth(kernel_stamps=args.client == "httpx-arrival")
    process = psutil.Process()
    async with make_http(args.client) as http:
        source = RequestSource(request_planner(workload, 0, 0), 0, None, args.duration)
        load = ClosedLoop(args.streams, source, args.duration)

        async def send(request, intended):  # type: ignore[no-untyped-def]
            return await adapter.measure(http, request, intended)

        def record(request, result):  # type: ignore[no-untyped-def]
            nonlocal events, ok
            health.add(result)
            if result.failure is not None:
                key = result.failure.error_class.value
                errors[key] = errors.get(key, 0) + 1
                return
            ok += 1
            events += len(result.token_stamps)
            ttft_all.append((result.first_token - result.sent) / 1e6)
            if result.sent >= steady_from:
                ttft.append(ttft_all[-1])
                itl.extend(g / 1e6 for g in result.itl_gaps())

        cpu0, wall0 = process.cpu_times(), time.perf_counter()
        steady_from = time.perf_counter_ns() + int(args.warmup * 1e9)
        async with health:
            await load.run(send, record)
        wall = time.perf_counter() - wall0
        cpu1 = process.cpu_times()
    cpu = (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / wall
    summary = health.summary()
    t = np.array(ttft) - args.ttft_ms if ttft else np.array([np.nan])
    t_all = np.array(ttft_all) - args.ttft_ms if ttft_all else np.array([np.nan])
    g = np.array(itl) - args.itl_ms if itl else np.array([np.nan])
    return {
        "client": args.client,
        "streams": args.streams,
        "requests_ok": ok,
        "errors": errors,
        "wall_s": wall,
        "events_per_s": events / wall,
        "ttft_err_p50_ms": float(np.percentile(t, 50)),
        "ttft_err_p99_ms": float(np.percentile(t, 99)),
        "ttft_err_p99_all_ms": float(np.percentile(t_all, 99)),
        "steady_requests": len(ttft),
        "itl_err_p50_ms": float(np.percentile(g, 50)),
        "itl_err_p99_ms": float(np.percentile(g, 99)),
        "cpu": cpu,
        "cpu_us_per_event": cpu * wall / events * 1e6 if events else float("nan"),
        "loop_lag_p99_ms": summary["loop_lag_p99_ms"],
        "client_bound": summary["client_bound_reasons"] or "-",
    }


def child_main() -> None:
    """Entry point of the child process: run once, print one JSON line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--client", choices=CLIENTS, default="httpx-arrival")
    parser.add_argument("--streams", type=int, required=True)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--ttft-ms", type=float, required=True)
    parser.add_argument("--itl-ms", type=float, required=True)
    parser.add_argument("--warmup", type=float, default=2.0)
    args = parser.parse_args()
    gc_tuning.tune(True)  # as a worker's loop does once it starts (event_loop.py)
    with asyncio.Runner(loop_factory=new_loop) as runner:
        print(json.dumps(runner.run(_run(args))), flush=True)


def run_child(
    url: str,
    client: str,
    streams: int,
    duration: float,
    tokens: int,
    ttft_ms: float,
    itl_ms: float,
    warmup: float = 2.0,
    timeout: float = 300,
) -> dict[str, Any]:
    """One measured run in a fresh process."""
    options = {
        "--url": url,
        "--client": client,
        "--streams": streams,
        "--duration": duration,
        "--tokens": tokens,
        "--ttft-ms": ttft_ms,
        "--itl-ms": itl_ms,
        "--warmup": warmup,
    }
    done = subprocess.run(
        [sys.executable, __file__, *(str(x) for pair in options.items() for x in pair)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        return {"client": client, "streams": streams, "failed": done.stderr[-500:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


@contextmanager
def process_endpoint(args: list[str], ready_prefix: str) -> Iterator[str]:
    """Start an endpoint process printing ``ready_prefix + port``; yield its /v1 URL."""
    process = subprocess.Popen(args, stdout=subprocess.PIPE, cwd=REPO)
    try:
        assert process.stdout is not None
        line = process.stdout.readline().decode().strip()
        if not line.startswith(ready_prefix):
            raise RuntimeError(f"endpoint did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line.removeprefix(ready_prefix))}/v1"
    finally:
        process.terminate()
        process.wait(10)
        if process.stdout is not None:
            process.stdout.close()


def machine() -> str:
    """A one-line description of this machine."""
    return (
        f"{psutil.cpu_count(logical=True)} CPUs ({platform.processor() or platform.machine()}), "
        f"Python {platform.python_version()}, load average {psutil.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    child_main()
