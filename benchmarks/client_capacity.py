"""What one worker process can drive: concurrent streams and token events per second.

Run: ``python benchmarks/client_capacity.py`` (``--help`` for options).

Against a minimal pre-encoded SSE endpoint in its own process (``tests/fakes/
sse_server.py``: 50 ms TTFT, then 64 tokens at 20 ms, one timer for all streams, so the
endpoint is not the bottleneck), each client configuration runs closed-loop at each
stream count in a fresh process for ``--duration`` seconds. Printed per run: token
events/s the client consumed, TTFT and ITL error against the endpoint's configured
timing (steady state, after ``--warmup`` s; the TTFT p99 over all requests beside it),
the endpoint's own lateness (so a late server is not blamed on the client), client CPU
(1.0 = one core) and per token event, event-loop lag p99 and the client-bound verdict.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.request

from client_common import CLIENTS, machine, process_endpoint, run_child
from rich.console import Console
from rich.table import Table

TTFT_MS, ITL_MS, TOKENS = 50.0, 20.0, 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[256, 1000])
    parser.add_argument("--clients", nargs="+", choices=CLIENTS, default=list(CLIENTS))
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    args = parser.parse_args()
    console = Console(width=220)
    table = Table(
        title=f"client capacity ({TTFT_MS:.0f} ms TTFT, {TOKENS} tokens at {ITL_MS:.0f} ms)"
    )
    for name in ("client", "streams", "ok req", "errors", "events/s", "TTFT err p50",
                 "TTFT err p99", "p99 incl. warm-up", "ITL err p50", "ITL err p99",
                 "server late p99", "CPU", "CPU/event", "loop lag p99",
                 "client-bound"):  # fmt: skip
        table.add_column(
            name, justify="left" if name in ("client", "errors", "client-bound") else "right"
        )
    server = [sys.executable, "-m", "tests.fakes.sse_server", "--port", "0",
              "--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS)]  # fmt: skip
    for streams in args.streams:
        for client in args.clients:
            with process_endpoint(server, "SSE_SERVER_READY port=") as url:
                console.print(f"[dim]{client} × {streams} streams ...[/dim]")
                row = run_child(
                    url, client, streams, args.duration, TOKENS, TTFT_MS, ITL_MS, args.warmup
                )
                with urllib.request.urlopen(url.removesuffix("/v1") + "/stats") as answer:
                    stats = json.loads(answer.read())
            if "failed" in row:
                table.add_row(client, str(streams), "-", row["failed"][-60:], *["-"] * 11)
                continue
            table.add_row(
                client,
                str(streams),
                str(row["requests_ok"]),
                ",".join(f"{k}={v}" for k, v in row["errors"].items()) or "-",
                f"{row['events_per_s']:,.0f}",
                f"{row['ttft_err_p50_ms']:.1f} ms",
                f"{row['ttft_err_p99_ms']:.1f} ms",
                f"{row['ttft_err_p99_all_ms']:.1f} ms",
                f"{row['itl_err_p50_ms']:.2f} ms",
                f"{row['itl_err_p99_ms']:.1f} ms",
                f"{stats['p99_ms']:.1f} ms",
                f"{row['cpu']:.2f}",
                f"{row['cpu_us_per_event']:.0f} µs",
                f"{row['loop_lag_p99_ms']:.1f} ms",
                str(row["client_bound"]),
            )
    console.print(table)
    console.print(f"machine: {machine()}")


if __name__ == "__main__":
    main()
