"""How faithfully the batching simulator keeps its own time at 1, 64 and 256 streams.

Run: ``python benchmarks/simulator_drift.py`` (options: ``--help``).

For each stream count it starts a real simulator process (405B FP8 on 8×H200 with a
4k context, so 256 sequences fit and decode together, chunked prefill), drives it
closed-loop for ``--duration`` seconds from a second process, then reads the
simulator's own measurements from ``GET /v1/simulator/stats``:

- *wake lateness*: how long after a step's deadline the engine woke up;
- *emit lateness*: how long after its token was due each event was handed to the server
  for writing (includes waking every other stream of the same step first).

The model's clock is absolute, so neither accumulates; they are the error on each
token's timestamp. Client-side ITL is printed too, as a sanity check against the model's
step time (it also includes the client's own delays and the prefill chunks' share).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import psutil
from rich.console import Console
from rich.table import Table

from scenarios.providers.simulate import SimulateSpec
from workers.runtime.event_loop import new_loop
from workers.simulator.process import READY_PREFIX
from workers.simulator.scheduler import BatchScheduler

REPO = Path(__file__).resolve().parent.parent
_TOKEN = b'"content":" tok'  # the simulator's token events (workers/simulator/server.py)


def start(spec: SimulateSpec) -> tuple[subprocess.Popen[bytes], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "workers.simulator", "--spec-json", spec.model_dump_json()],
        stdout=subprocess.PIPE,
        cwd=REPO,
    )
    assert process.stdout is not None
    line = process.stdout.readline().decode().strip()
    if not line.startswith(READY_PREFIX):
        raise RuntimeError(f"simulator did not start: {line!r}")
    return process, f"http://127.0.0.1:{int(line.removeprefix(READY_PREFIX))}/v1"


async def drive(url: str, streams: int, duration: float, prompt: int, output: int) -> list[float]:
    """Closed loop for ``duration`` seconds; client-side gaps between reads carrying tokens.

    A deliberately minimal client (keep-alive socket, byte counting, no JSON): at 256
    streams on two shared cores the full measurement client would itself limit how many
    requests reach the simulator, and this benchmark is about the simulator.
    """
    host, port = url.removeprefix("http://").split("/")[0].split(":")
    body = orjson.dumps(
        {
            "model": "simulated",
            "messages": [{"role": "user", "content": " ".join(["word"] * prompt)}],
            "max_tokens": output,
            "stream": True,
        }
    )
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: sim\r\ncontent-type: application/json"
        b"\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
    )
    deadline = time.perf_counter() + duration
    gaps: list[float] = []

    async def user() -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            while time.perf_counter() < deadline:
                writer.write(request)
                last = None
                while True:
                    data = await reader.read(65536)
                    if not data:
                        return
                    now = time.perf_counter()
                    if _TOKEN in data:
                        if last is not None:
                            gaps.append(now - last)
                        last = now
                    if data.endswith(b"0\r\n\r\n"):
                        break
        finally:
            writer.close()

    await asyncio.gather(*(user() for _ in range(streams)))
    return gaps


def measure(
    simulator: tuple[subprocess.Popen[bytes], str],
    streams: int,
    duration: float,
    prompt: int,
    output: int,
) -> dict[str, Any]:
    process, url = simulator
    try:
        server = psutil.Process(process.pid)
        cpu_before, wall_before = server.cpu_times(), time.perf_counter()
        with asyncio.Runner(loop_factory=new_loop) as runner:
            gaps = runner.run(drive(url, streams, duration, prompt, output))
        cpu_after, wall = server.cpu_times(), time.perf_counter() - wall_before
        stats: dict[str, Any] = httpx.get(f"{url}/simulator/stats").json()
    finally:
        process.terminate()
        process.wait(10)
        if process.stdout is not None:
            process.stdout.close()
    busy = (cpu_after.user + cpu_after.system) - (cpu_before.user + cpu_before.system)
    stats["server_cpu"] = busy / wall
    stats["client_itl_p50_ms"] = statistics.median(gaps) * 1000 if gaps else float("nan")
    stats["events_per_s"] = stats["emit_lateness"]["count"] / wall
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 64, 256])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per level")
    parser.add_argument("--prompt", type=int, default=16, help="prompt tokens per request")
    parser.add_argument("--output", type=int, default=128, help="output tokens per request")
    parser.add_argument(
        "--client-nice",
        type=int,
        default=0,
        help="lower the load generator's CPU priority by this much (after starting the "
        "simulator), to separate the simulator's own lateness from CPU contention",
    )
    args = parser.parse_args()
    spec = SimulateSpec(model="llama-3.1-405b", quant="fp8", hardware="h200", gpus=8, context=4096)
    # The table is wide; when piped (CI logs, files) do not wrap it at 80 columns.
    console = Console(width=None if Console().is_terminal else 160)
    console.print(
        f"simulator: {spec.model} {spec.quant} on {spec.gpus}×{spec.hardware}, efficiency "
        f"{spec.efficiency}, context {spec.context}; {args.prompt}-token prompts, "
        f"{args.output}-token answers, {args.duration:g} s per level, client nice "
        f"+{args.client_nice}"
    )
    table = Table(title="Simulator timing drift (ms behind the model's clock)")
    for header in (
        "streams",
        "max batch",
        "events/s",
        "server CPU",
        "wake p50",
        "wake p99",
        "wake max",
        "emit p50",
        "emit p99",
        "emit p99.9",
        "emit max",
        "client ITL p50",
        "model step",
    ):
        table.add_column(header, justify="right")
    cost = BatchScheduler.from_spec(spec).cost
    # A fresh simulator per level, all started before the client lowers its priority
    # (children inherit it); idle ones cost nothing until their turn.
    simulators = [start(spec) for _ in args.streams]
    if args.client_nice:
        psutil.Process().nice(psutil.Process().nice() + args.client_nice)
    for streams, simulator in zip(args.streams, simulators, strict=True):
        stats = measure(simulator, streams, args.duration, args.prompt, args.output)
        # decode step of the whole batch at the mean context (prompt + half the answer)
        step = cost.seconds(streams, streams * (args.prompt + args.output / 2), 0)
        wake, emit = stats["wake_lateness"], stats["emit_lateness"]
        table.add_row(
            str(streams),
            str(stats["max_running"]),
            f"{stats['events_per_s']:,.0f}",
            f"{stats['server_cpu']:.0%}",
            f"{wake['p50_ms']:.2f}",
            f"{wake['p99_ms']:.2f}",
            f"{wake['max_ms']:.2f}",
            f"{emit['p50_ms']:.2f}",
            f"{emit['p99_ms']:.2f}",
            f"{emit['p999_ms']:.2f}",
            f"{emit['max_ms']:.2f}",
            f"{stats['client_itl_p50_ms']:.2f}",
            f"{step * 1000:.2f}",
        )
    console.print(table)


if __name__ == "__main__":
    main()
