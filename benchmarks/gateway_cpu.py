"""CPU per proxied streamed request: the shadow gateway (capture on) against nginx.

    python benchmarks/gateway_cpu.py [--requests 1024] [--streams 16 64] [--profile DIR]

One run, one endpoint: a private Redis, `tokenbench serve`, one `tokenbench simulate`
endpoint (the primary: 50 ms TTFT, 10 ms ITL, 16 tokens a stream), nginx in front of it
(the generated config of ``gateway_overhead.py``: ``proxy_buffering off``, keep-alive
upstream, one worker; ``apt-get install nginx``, required here) and ``tokenbench
gateway`` in front of it too, sampling 10 % of the requests (``--sample-rate``) to a
region with no worker, the text of every request captured. At each level the same
closed-loop client (the workers' measurement code, in this process) runs ``--requests``
streamed chat requests through nginx and as many through the gateway, alternating in
rounds of ``max(20, 4 x streams)`` so both see the same machine load; warm-up rounds
(``max(64, 2 x streams)`` requests a path: the capture's first shadow send sets Celery
up) come first and are not counted.

Measured: user + system CPU (psutil, every thread) of nginx's master and worker
processes, and of the gateway's whole process tree - the primary path and the capture
process it spawns (and whatever else it starts) - over the level, divided by the
requests that level proxied through each. The gateway's tree is read again after the
level once its capture process has published what the level left behind (hand-off
batches and records every 0.5 s), so that work is counted too; so are the
idle wakeups of either during the other's rounds. The client's and the endpoint's CPU
are not counted. The load average (1 min) is printed before → after each level.

``--profile DIR``: py-spy (``pip install py-spy``; without it, said and skipped) samples
the gateway and its capture process 1,000 times a second for the whole run, without
stopping them (``--nonblocking``) and only where a thread holds the GIL (``--gil``:
threads waiting in ``epoll``, on a lock or in a sleep are left out); each process's
functions of this code base are printed by share of those samples inclusive of what
they call, and any function by own share, the raw stacks kept in DIR. Time a C function
spends holding the GIL (a socket write in uvloop, orjson, Arrow) is its Python caller's
own time. A profile costs the profiled processes some CPU: a run with ``--profile`` is
for where the time goes, not for the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gateway_overhead import TOKEN, measure, start_nginx, write_gateway_config  # noqa: E402
from processes import spawn, stop_all, wait_http  # noqa: E402

from api.local.redis_server import free_port, start_redis_server  # noqa: E402
from workers.client.http import make_client  # noqa: E402

ROUND = 20  # requests per path and round, at least
SETTLE_S = 2.0  # the hand-off (0.5 s), then the sink (0.5 s): the last batch is in by then


def tree_cpu_seconds(pid: int) -> tuple[float, float]:
    """User + system CPU seconds of process ``pid`` (all its threads), and of its
    descendants: the living ones and those it has already reaped."""
    try:
        root = psutil.Process(pid)
        family = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0, 0.0
    own = descendants = 0.0
    for each in family:
        try:
            times = each.cpu_times()
        except psutil.NoSuchProcess:
            continue
        if each is root:
            own += times.user + times.system
        else:
            descendants += times.user + times.system
        descendants += times.children_user + times.children_system
    return own, descendants


@dataclass
class PathFigures:
    """One path's counts over one level."""

    requests: int = 0
    failed: int = 0
    cpu_s: float = 0.0  # the whole process tree
    own_cpu_s: float = 0.0  # its first process alone (the gateway's primary path)


@dataclass
class Level:
    """One level's figures, per path."""

    streams: int
    load_before: float
    load_after: float = 0.0
    paths: dict[str, PathFigures] = field(default_factory=dict)


async def run_level(
    bases: dict[str, str], pids: dict[str, int], requests: int, streams: int
) -> Level:
    """``requests`` per path at ``streams`` concurrent streams, paths alternating."""
    level = Level(streams, os.getloadavg()[0])
    http = make_client()
    for base in bases.values():  # warm connections on both sides (not counted)
        await measure(http, base, max(64, streams * 2), streams)
    await asyncio.sleep(SETTLE_S)
    start = {name: tree_cpu_seconds(pid) for name, pid in pids.items()}
    level.paths = {name: PathFigures() for name in bases}
    per_round = max(ROUND, streams * 4)
    done = 0
    while done < requests:
        count = min(per_round, requests - done)
        for name, base in bases.items():
            results = await measure(http, base, count, streams)
            figures = level.paths[name]
            figures.requests += len(results)
            figures.failed += sum(
                1 for r in results if not (r.ok and r.first_token is not None and r.end is not None)
            )
        done += count
    await http.aclose()
    await asyncio.sleep(SETTLE_S)  # the capture publishes what the level left behind
    for name, pid in pids.items():
        own, descendants = tree_cpu_seconds(pid)
        figures = level.paths[name]
        figures.own_cpu_s = own - start[name][0]
        figures.cpu_s = figures.own_cpu_s + descendants - start[name][1]
    level.load_after = os.getloadavg()[0]
    return level


OUR_ROOMS = ("(workers/", "(scenarios/")
# Entry points every sample passes through: not where the time goes.
ENTRY_POINTS = ("<module> ", "main ", "run ", "serve ")


class Profiler:
    """py-spy on the gateway's processes for the whole run (GIL-holding samples)."""

    def __init__(self, out: Path | None, pids: dict[str, int]) -> None:
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.files: dict[str, Path] = {}
        if out is None:
            return
        binary = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        if not Path(binary).exists():
            Console().print("[yellow]py-spy not installed: no profile[/yellow]")
            return
        out.mkdir(parents=True, exist_ok=True)
        for name, pid in pids.items():
            self.files[name] = out / f"{name}.txt"
            self.procs[name] = subprocess.Popen(
                [binary, "record", "--nonblocking", "--gil", "--format", "raw", "--rate", "1000",
                 "--pid", str(pid), "--output", str(self.files[name])],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        time.sleep(1.0)  # attached

    def finish(self, console: Console, top: int) -> None:
        """Stop py-spy (it writes its file) and print each process's top functions."""
        for proc in self.procs.values():
            proc.send_signal(signal.SIGINT)
        for name, proc in self.procs.items():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
            if not self.files[name].exists():
                console.print(f"[yellow]{name}: py-spy wrote no profile[/yellow]")
                continue
            console.print(top_functions(name, self.files[name], top))


def top_functions(name: str, path: Path, top: int) -> Table:
    """Where a process's samples are: the functions of this code base by share inclusive
    of what they call, and any function by own share (top of the stack)."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        total += int(count)
        frames = stack.split(";")
        own[frames[-1]] += int(count)
        ours = {f for f in frames if any(room in f for room in OUR_ROOMS)}
        for frame in {f for f in ours if not f.startswith(ENTRY_POINTS)}:
            inclusive[frame] += int(count)
    table = Table(title=f"{name}: {total} samples holding the GIL (py-spy, 1,000/s)")
    for header in ("incl.", "our function (file:line)", "own", "any function"):
        table.add_column(header, justify="right" if header in ("incl.", "own") else "left")
    mine, anyone = inclusive.most_common(top), own.most_common(top)
    for i in range(max(len(mine), len(anyone))):
        a = mine[i] if i < len(mine) else ("", 0)
        b = anyone[i] if i < len(anyone) else ("", 0)
        table.add_row(
            f"{a[1] / max(total, 1):.1%}" if a[0] else "", a[0][:90],
            f"{b[1] / max(total, 1):.1%}" if b[0] else "", b[0][:70],
        )  # fmt: skip
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1024, help="per path and level")
    parser.add_argument("--streams", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--sample-rate", type=float, default=0.10, help="share mirrored")
    parser.add_argument("--profile", type=Path, default=None, help="py-spy stacks into DIR")
    parser.add_argument("--top", type=int, default=25, help="profile rows per process")
    args = parser.parse_args()
    console = Console(width=160)
    if not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()):
        raise SystemExit("nginx is not installed: apt-get install nginx")
    redis = start_redis_server()
    tmp = Path(tempfile.mkdtemp(prefix="tb-gateway-cpu-"))
    tmp.chmod(0o755)  # nginx's worker runs as nobody
    env = {
        **os.environ,
        "TOKENBENCH__REDIS__URL": redis.url,
        "TOKENBENCH__API__TOKENS": f'["{TOKEN}"]',
        "TOKENBENCH_TOKEN": TOKEN,
        "TOKENBENCH__EGRESS__ALLOW_LOOPBACK": "true",
    }
    procs: list[subprocess.Popen[bytes]] = []
    started = time.monotonic()
    try:
        api_port, sim_port, gw_port, nginx_port = free_port(), free_port(), free_port(), free_port()
        procs.append(
            spawn(["serve", "--port", str(api_port), "--db", str(tmp / "b.duckdb")], env,
                  tmp / "api.log")
        )  # fmt: skip
        procs.append(
            spawn(["simulate", "--port", str(sim_port), "--ttft-ms", "50", "--itl-ms", "10"],
                  env, tmp / "sim.log")
        )  # fmt: skip
        wait_http(f"http://127.0.0.1:{api_port}/healthz")
        wait_http(f"http://127.0.0.1:{sim_port}/health")
        direct = f"http://127.0.0.1:{sim_port}/v1"
        write_gateway_config(tmp / "gateway.yaml", "bench-cpu", direct, args.sample_rate)
        gateway = spawn(
            ["gateway", "--config", str(tmp / "gateway.yaml"), "--port", str(gw_port),
             "--server", f"http://127.0.0.1:{api_port}", "--wait-for-workers"],
            env, tmp / "gateway.log",
        )  # fmt: skip
        procs.append(gateway)
        nginx = start_nginx(tmp, sim_port, nginx_port)
        assert nginx is not None
        procs.append(nginx)
        wait_http(f"http://127.0.0.1:{nginx_port}/health")
        wait_http(f"http://127.0.0.1:{gw_port}/gateway/health")
        bases = {"nginx": f"http://127.0.0.1:{nginx_port}/v1",
                 "gateway": f"http://127.0.0.1:{gw_port}/v1"}  # fmt: skip
        pids = {"nginx": nginx.pid, "gateway": gateway.pid}
        children = psutil.Process(gateway.pid).children(recursive=True)
        profiled = {"gateway": gateway.pid, **{f"capture-{c.pid}": c.pid for c in children}}
        profile = Profiler(args.profile, profiled)
        levels = [
            asyncio.run(run_level(bases, pids, args.requests, streams)) for streams in args.streams
        ]
        stats = httpx.get(f"http://127.0.0.1:{gw_port}/gateway/stats").json()
        table = Table(
            title=f"CPU per proxied streamed request (loopback; 16 tokens, 50 ms TTFT, 10 ms "
            f"ITL; gateway sampling {args.sample_rate:.0%}, capture on, capture process "
            f"included; {os.cpu_count()} cores)"
        )
        for header in ("streams", "path", "requests", "failed", "CPU s", "CPU ms / request",
                       "of which primary path + capture", "gateway / nginx",
                       "load avg (1 min)"):  # fmt: skip
            table.add_column(header, justify="right")
        for level in levels:
            per = {n: 1000 * f.cpu_s / max(f.requests, 1) for n, f in level.paths.items()}
            for name, figures in level.paths.items():
                ratio = split = ""
                if name == "gateway":
                    ratio = f"{per['gateway'] / per['nginx']:.2f}"
                    own = 1000 * figures.own_cpu_s / max(figures.requests, 1)
                    split = f"{own:.3f} + {per[name] - own:.3f}"
                table.add_row(
                    str(level.streams), name, str(figures.requests), str(figures.failed),
                    f"{figures.cpu_s:.2f}", f"{per[name]:.3f}", split, ratio,
                    f"{level.load_before:.2f} → {level.load_after:.2f}",
                    end_section=name == "gateway",
                )  # fmt: skip
        console.print(table)
        capture, shadow = stats["capture"], stats["shadow"]
        console.print(
            f"gateway: {stats['requests']} requests, {stats['sampled']} sampled "
            f"({shadow['sent']} enqueued, {shadow['dropped_backlog']} dropped at the backlog "
            f"bound), {capture['captured']} captured, {capture['requests_dropped']} hand-offs "
            f"dropped; load average (1, 5, 15 min) {os.getloadavg()}; "
            f"{time.monotonic() - started:.0f} s"
        )
        profile.finish(console, args.top)
    finally:
        stop_all(procs)
        redis.stop()


if __name__ == "__main__":
    main()
