"""Latency the shadow gateway adds on the primary path, next to nginx in front of the same endpoint.

    python benchmarks/gateway_overhead.py [--requests 300] [--concurrency 1 16 64]

Starts a private Redis, `tokenbench serve`, one `tokenbench simulate` endpoint (the
primary), `python -m api gateway` in front of it and nginx in front of it too (a
generated config on a free port: `proxy_buffering off`, HTTP/1.1 keep-alive upstream,
one worker process; `apt-get install nginx` - without the binary that column is skipped
and said so), all on loopback. The gateway samples *every* request (sample_rate 1,
messages stored) into a region with no worker, so each request pays for sampling, the
task hand-off and the capture: the worst case. Tasks pile up in the region's queue until
the backlog bound drops them, as in an outage.

At each concurrency the same closed-loop client (the workers' own measurement code)
runs against the primary directly, via nginx and via the gateway, alternating in short
rounds so all paths see the same machine load. Reported: client-side TTFT and E2E
percentiles of every path, gateway - nginx and nginx - direct, the gateway's own time
before forwarding (its records' schedule lag: request fully read -> upstream send
begins), the capture hand-off's counters and the load average.

Then, less noisy than latency on a shared machine, *the capture process alone*: its code
(``workers.gateway.capture.Capture`` with the real shadow sender and record sink, on
this benchmark's Redis) fed ``--capture-requests`` requests at ``--capture-rps`` (320,
about the 64-stream level's rate) in a child process of its own, with sampling at 100 %
and at 0 %: CPU per request (threads included), the shadow messages it published and
what it dropped. The difference of the two rows is what sampling costs per request.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil
import pyarrow as pa
import yaml
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from processes import spawn, stop_all, wait_http  # noqa: E402

from api.local.redis_server import free_port, start_redis_server  # noqa: E402
from workers.client.adapters.openai_chat import ChatParser, chat_body  # noqa: E402
from workers.client.http import make_client  # noqa: E402
from workers.client.result import RequestResult  # noqa: E402
from workers.client.streaming import HttpCall, Limits, json_headers, measure_request  # noqa: E402
from workers.prompts.plan import PlannedRequest  # noqa: E402

TOKEN = "bench-token"
ROUND = 20  # requests per path before switching to the other one


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
            results.append(await measure_request(http, call, ChatParser, limits, None, start))

    await asyncio.gather(*(user() for _ in range(concurrency)))
    return results


def ms(values: list[int]) -> np.ndarray[Any, Any]:
    return np.asarray(values, dtype=float) / 1e6


NGINX_CONF = """
worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/nginx-body;
    proxy_temp_path {tmp}/nginx-proxy;
    fastcgi_temp_path {tmp}/nginx-fastcgi;
    uwsgi_temp_path {tmp}/nginx-uwsgi;
    scgi_temp_path {tmp}/nginx-scgi;
    upstream primary {{
        server 127.0.0.1:{upstream};
        keepalive 256;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://primary;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }}
    }}
}}
"""


def cpu_seconds(pid: int, children: bool = True, only_children: bool = False) -> float:
    """User + system CPU seconds of process ``pid`` and (or only) its descendants so far."""
    process = psutil.Process(pid)
    family = process.children(recursive=True) if children else []
    total = 0.0
    for each in family if only_children else [process, *family]:
        try:
            times = each.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def write_gateway_config(path: Path, name: str, direct: str, sample_rate: float) -> None:
    """The benchmark gateway's configuration: ``direct`` as the primary, one simulated
    shadow in a region no worker serves (its tasks wait in the queue), bodies stored."""
    config = {
        "name": name,
        "primary": {"name": "prod", "kind": "openai", "base_url": direct, "model": "simulated"},
        "shadows": [{"name": "cand", "kind": "simulated"}],
        "sample_rate": sample_rate,
        "regions": ["nobody"],
        "privacy": {"store_text": True},
    }
    path.write_text(yaml.safe_dump(config))


def start_nginx(tmp: Path, upstream: int, port: int) -> subprocess.Popen[bytes] | None:
    """nginx in front of ``upstream`` on ``port``, or None when it is not installed."""
    binary = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).exists()), None
    )
    if binary is None:
        return None
    conf = tmp / "nginx.conf"
    conf.write_text(NGINX_CONF.format(tmp=tmp, upstream=upstream, port=port))
    with (tmp / "nginx.log").open("wb") as out:
        return subprocess.Popen(
            [binary, "-c", str(conf), "-p", str(tmp)], stdout=out, stderr=subprocess.STDOUT
        )


async def run_level(
    bases: dict[str, str], requests: int, concurrency: int
) -> dict[str, dict[str, np.ndarray[Any, Any]]]:
    http = make_client()
    paths: dict[str, list[RequestResult]] = {name: [] for name in bases}
    for base in bases.values():  # warm connections
        await measure(http, base, concurrency * 2, concurrency)
    per_round = max(ROUND, concurrency * 4)
    done = 0
    while done < requests:
        for name, base in bases.items():
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


CAPTURE_BODY = (
    b'{"model":"simulated","messages":[{"role":"user","content":"a short prompt of a few '
    b'words"}],"max_tokens":16,"stream":true}'
)


def sse_answer(start: int) -> list[tuple[int, bytes]]:
    """The primary's 16-token stream as the gateway hands it over: stamped pieces."""
    head = b'data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":'
    role = head + b'{"role":"assistant","content":""}}]}\n\n'
    token = head + b'{"content":"tok "}}]}\n\n'
    # The last token ends the answer, as the simulator's does (an answer without a
    # finish_reason is an incomplete one: recorded as an error, redacted message and all).
    last = head + b'{"content":"tok "},"finish_reason":"length"}]}\n\n'
    usage = b'data: {"id":"x","choices":[],"usage":{"prompt_tokens":6,"completion_tokens":16}}'
    pieces = [(start + 50_000_000, role)]
    pieces += [(start + 50_000_000 + i * 10_000_000, token) for i in range(15)]
    pieces.append((start + 200_000_000, last))
    return [*pieces, (start + 210_000_000, usage + b"\n\ndata: [DONE]\n\n")]


def capture_alone(redis_url: str, requests: int, rps: float, sample_rate: float) -> None:
    """Child process: the capture's code fed ``requests`` requests at ``rps``; prints
    its CPU per request and the sender's counters as JSON."""
    from scenarios.gateway_config import parse_gateway_config  # noqa: PLC0415
    from workers.gateway.capture import Answer, Capture  # noqa: PLC0415
    from workers.gateway.sender import ShadowSender  # noqa: PLC0415
    from workers.gateway.sink import RecordSink  # noqa: PLC0415
    from workers.runtime.event_loop import new_loop  # noqa: PLC0415

    config = parse_gateway_config(
        {
            "primary": {
                "name": "prod",
                "kind": "openai",
                "base_url": "http://127.0.0.1:9/v1",
                "model": "simulated",
            },
            "shadows": [{"name": "cand", "kind": "simulated"}],
            "sample_rate": sample_rate,
            "regions": ["nobody-alone"],
            "privacy": {"store_text": True},
            "max_queue_backlog": 1_000_000,
        }
    )

    async def go() -> dict[str, Any]:
        from redis.asyncio import Redis  # noqa: PLC0415

        from workers.runtime.celery_app import app as celery_app  # noqa: PLC0415

        redis = Redis.from_url(redis_url)
        sender = ShadowSender(
            celery=celery_app,
            broker_url=redis_url,
            run_id="capture-alone",
            providers=[p.model_dump(mode="json") for p in config.shadows],
            regions=list(config.regions),
            max_pending=config.max_pending,
            max_backlog=config.max_queue_backlog,
            ttl_s=30,
        )
        sink = RecordSink(redis, "capture-alone")
        capture = Capture(config, "capture-alone", "bench", sender, sink, "", ())
        sender.start()
        sink.start()
        await asyncio.sleep(0.5)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu0, started = usage.ru_utime + usage.ru_stime, time.perf_counter()
        for i in range(requests):
            received = time.perf_counter_ns()
            key = f"{i:032x}"
            capture.begin(key, i, received, CAPTURE_BODY, None)
            chunks = sse_answer(received)
            capture.end(key, Answer(received + 10_000, 200, {}, chunks, received + 211_000_000,
                                    None, True))  # fmt: skip
            delay = started + (i + 1) / rps - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
        await asyncio.to_thread(sender.stop, 30.0)
        await sink.close()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        await redis.aclose()
        return {
            "cpu_ms": 1000 * (usage.ru_utime + usage.ru_stime - cpu0) / requests,
            "rps": requests / (time.perf_counter() - started),
            **vars(sender.stats),
        }

    with asyncio.Runner(loop_factory=new_loop) as runner:
        print(json.dumps(runner.run(go())))


def run_capture_alone(
    env: dict[str, str], redis_url: str, requests: int, rps: float, sample_rate: float
) -> dict[str, Any]:
    """:func:`capture_alone` in a child process (its CPU is its own)."""
    code = (
        f"import sys; sys.path[:0] = [{str(REPO)!r}, {str(Path(__file__).parent)!r}]; "
        "import gateway_overhead as g; "
        f"g.capture_alone({redis_url!r}, {requests}, {rps}, {sample_rate})"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
        cwd=REPO, timeout=600,
    )  # fmt: skip
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--requests", type=int, default=300, help="per path and level (at least 16 per stream)"
    )
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument(
        "--sample-rate", type=float, default=1.0, help="share mirrored (1: every request)"
    )
    parser.add_argument("--ttft-ms", type=float, default=50, help="the primary's TTFT")
    parser.add_argument(
        "--itl-ms", type=float, default=10, help="the primary's inter-token gap (100 tok/s)"
    )
    parser.add_argument(
        "--capture-requests",
        type=int,
        default=3000,
        help="the capture alone: requests fed (0: skip it)",
    )
    parser.add_argument("--capture-rps", type=float, default=320.0,
                        help="the capture alone: requests per second")  # fmt: skip
    args = parser.parse_args()
    console = Console(width=150)
    redis = start_redis_server()
    tmp = Path(tempfile.mkdtemp(prefix="tb-gateway-bench-"))
    tmp.chmod(0o755)  # nginx's worker runs as nobody
    env = {
        **os.environ,
        "TOKENBENCH__REDIS__URL": redis.url,
        "TOKENBENCH__API__TOKENS": f'["{TOKEN}"]',
        "TOKENBENCH_TOKEN": TOKEN,
        "TOKENBENCH__EGRESS__ALLOW_LOOPBACK": "true",
    }
    procs: list[subprocess.Popen[bytes]] = []
    try:
        api_port, sim_port, gw_port, nginx_port = free_port(), free_port(), free_port(), free_port()
        procs.append(
            spawn(
                ["serve", "--port", str(api_port), "--db", str(tmp / "b.duckdb")],
                env,
                tmp / "api.log",
            )
        )
        procs.append(
            spawn(
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
        write_gateway_config(tmp / "gateway.yaml", "bench", direct, args.sample_rate)
        gateway_proc = spawn(
            [
                "gateway",
                *("--config", str(tmp / "gateway.yaml"), "--port", str(gw_port)),
                *("--server", f"http://127.0.0.1:{api_port}", "--wait-for-workers"),
            ],
            env,
            tmp / "gateway.log",
        )
        procs.append(gateway_proc)
        nginx = start_nginx(tmp, sim_port, nginx_port)
        bases = {"direct": direct}
        if nginx is None:
            console.print("[yellow]nginx not installed: its column is skipped[/yellow]")
        else:
            procs.append(nginx)
            wait_http(f"http://127.0.0.1:{nginx_port}/health")
            bases["nginx"] = f"http://127.0.0.1:{nginx_port}/v1"
        wait_http(f"http://127.0.0.1:{gw_port}/gateway/health")
        bases["gateway"] = f"http://127.0.0.1:{gw_port}/v1"
        session = httpx.get(f"http://127.0.0.1:{gw_port}/gateway/health").json()["session"]

        table = Table(
            title=f"gateway overhead on the primary path (loopback, ms; primary TTFT "
            f"{args.ttft_ms:g} ms, ITL {args.itl_ms:g} ms, 16 tokens; sampling "
            f"{args.sample_rate:.0%})"
        )
        for header in ("concurrency", "metric", "path", "n", "p50", "p99", "load avg"):
            table.add_column(header, justify="right")
        # The gateway's primary path alone, its capture process (and simulators), nginx.
        watched: dict[str, Callable[[], float]] = {
            "gateway primary path": lambda: cpu_seconds(gateway_proc.pid, children=False),
            "gateway capture": lambda: cpu_seconds(gateway_proc.pid, only_children=True),
        }
        if nginx is not None:
            nginx_pid = nginx.pid
            watched["nginx"] = lambda: cpu_seconds(nginx_pid)
        cpu_rows: list[tuple[int, dict[str, float], int]] = []
        differences = [("gateway", "nginx"), ("nginx", "direct"), ("gateway", "direct")]
        for level in args.concurrency:
            before = os.getloadavg()[0]
            cpu_start = {name: measure_cpu() for name, measure_cpu in watched.items()}
            # At least 16 per stream: a p99 over a few hundred requests is a few of them.
            figures = asyncio.run(run_level(bases, max(args.requests, 16 * level), level))
            cpu_rows.append(
                (
                    level,
                    {name: cpu() - cpu_start[name] for name, cpu in watched.items()},
                    len(figures["gateway"]["ttft"]),
                )
            )
            load = f"{before:.2f}→{os.getloadavg()[0]:.2f}"
            for metric in ("ttft", "e2e"):
                for name, values in figures.items():
                    p50, p99 = np.percentile(values[metric], [50, 99])
                    table.add_row(
                        str(level), metric, name, str(len(values[metric])),
                        f"{p50:.2f}", f"{p99:.2f}", load,
                    )  # fmt: skip
                for a, b in differences:
                    if a not in figures or b not in figures:
                        continue
                    added = np.percentile(figures[a][metric], [50, 99]) - np.percentile(
                        figures[b][metric], [50, 99]
                    )
                    table.add_row(
                        str(level), metric, f"[bold]{a} − {b}[/bold]", "",
                        f"{added[0]:+.2f}", f"{added[1]:+.2f}", "",
                        end_section=metric == "e2e" and (a, b) == differences[-1],
                    )  # fmt: skip
        time.sleep(1.5)  # the hand-off and the record sink each wait up to 0.5 s
        stats = httpx.get(f"http://127.0.0.1:{gw_port}/gateway/stats").json()
        records = httpx.get(
            f"http://127.0.0.1:{api_port}/v1/runs/{session}/records",
            headers={"authorization": f"Bearer {TOKEN}"},
        )
        lag = pa.ipc.open_stream(records.content).read_all().column("schedule_lag_ms").to_numpy()
        p50, p99 = np.percentile(lag, [50, 99])
        table.add_row(
            "all", "forward", "gateway's own", str(len(lag)), f"{p50:.3f}", f"{p99:.3f}", ""
        )
        console.print(table)
        shadow, capture = stats["shadow"], stats["capture"]
        console.print(
            f"capture hand-off: {capture['requests_handed']} requests handed, "
            f"{capture['requests_dropped']} dropped (buffer {capture['max_buffer_bytes']} B), "
            f"{capture['captured']} captured; samples {stats['sampled']}, offered "
            f"{shadow['offered']}, enqueued {shadow['sent']}, dropped: full "
            f"{shadow['dropped_full']}, backlog {shadow['dropped_backlog']}, "
            f"errors {shadow['send_errors']}"
        )
        for level, cpu, count in cpu_rows:
            console.print(
                f"CPU per request proxied at concurrency {level} (ms; the whole level, "
                "warm-up included): "
                + ", ".join(f"{name} {seconds * 1000 / count:.3f}" for name, seconds in cpu.items())
            )
        console.print(f"load average (1, 5, 15 min) at the end: {os.getloadavg()}")
        if args.capture_requests > 0:
            alone = Table(
                title=f"the capture process alone: {args.capture_requests:,} requests at "
                f"{args.capture_rps:g}/s (a 16-token stream each), load {os.getloadavg()[0]:.2f}"
            )
            for header in ("sampling", "CPU ms / request", "achieved req/s", "samples sent",
                           "shadow messages", "dropped (full, backlog, errors)"):  # fmt: skip
                alone.add_column(header, justify="right")
            for rate in (1.0, 0.0):
                row = run_capture_alone(
                    env, redis.url, args.capture_requests, args.capture_rps, rate
                )
                alone.add_row(
                    f"{rate:.0%}", f"{row['cpu_ms']:.3f}", f"{row['rps']:.0f}", str(row["sent"]),
                    str(row.get("batches", row["sent"])),
                    f"{row['dropped_full']}, {row['dropped_backlog']}, {row['send_errors']}",
                )  # fmt: skip
            console.print(alone)
            console.print(f"load average at the end: {os.getloadavg()}")
    finally:
        stop_all(procs)
        redis.stop()


if __name__ == "__main__":
    main()
