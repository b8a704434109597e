"""/healthz latency while K clients view a 10,000-shard run (GET /v1/runs/{id}).

    python benchmarks/healthz_under_views.py [--clients 4] [--views 3] [--live]

Starts a private Redis and `tokenbench serve` on loopback (no worker: the run is created
waiting for one, then cancelled, so its 10,000 shards are stored without any request
being sent; with ``--live`` it is left waiting, and viewed from the control plane's
memory), then:

1. probes /healthz alone (the baseline);
2. lets ``--clients`` threads GET the run's view ``--views`` times each while one more
   thread probes /healthz every 20 ms;

and prints a table: /healthz p50/p99/max in both phases, the view latency, the views
answered 503 (the control plane's limiter, docs/security.md "Bounds"), and the load
average beside the figures (a 2-core machine shared with other work moves them).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# big_scenario: 25 providers × 100 levels × 4 regions = 10,000 shards (MAX_SHARDS_PER_RUN),
# in regions of their own that no worker serves: the same run the tests view.
from api.local.redis_server import free_port, start_redis_server  # noqa: E402
from tests.support.views_under_load import big_scenario  # noqa: E402

TOKEN = "bench-token"
PROBE_INTERVAL_S = 0.02


def big_run(client: httpx.Client, live: bool) -> tuple[str, int]:
    """Create the 10,000-shard run; unless ``live``, cancel it and wait until it is
    stored as ended (a live one waits for a worker: its view is built from memory)."""
    created = client.post(
        "/v1/runs", json={"scenario": big_scenario(), "wait_for_workers": True}, timeout=300
    )
    created.raise_for_status()
    run_id, shards = created.json()["id"], created.json()["shards"]
    if live:
        return run_id, shards
    client.post(f"/v1/runs/{run_id}/cancel", timeout=300).raise_for_status()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        answer = client.get(f"/v1/runs/{run_id}", timeout=300)
        if answer.status_code == 200 and answer.json()["state"] != "running":
            return run_id, shards
        time.sleep(1.0)
    raise TimeoutError(f"run {run_id} still running")


def load_average() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f} / {five:.2f}"


def probe(base: str, stop: threading.Event, out: list[float]) -> None:
    """/healthz latencies (seconds) until ``stop`` is set."""
    with httpx.Client(base_url=base, timeout=60) as client:
        while not stop.is_set():
            started = time.perf_counter()
            client.get("/healthz").raise_for_status()
            out.append(time.perf_counter() - started)
            time.sleep(PROBE_INTERVAL_S)


def viewer(base: str, run_id: str, views: int, out: list[tuple[int, float]]) -> None:
    """``views`` GETs of the run's view: (status, seconds) each."""
    headers = {"authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=base, headers=headers, timeout=300) as client:
        for _ in range(views):
            started = time.perf_counter()
            status = client.get(f"/v1/runs/{run_id}").status_code
            out.append((status, time.perf_counter() - started))


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(values: list[float], q: float) -> str:
    return f"{quantile(values, q) * 1000:.1f} ms" if values else "-"


def measure(base: str, run_id: str, clients: int, views: int) -> dict[str, Any]:
    """Baseline /healthz, then /healthz while the views are in flight."""
    idle: list[float] = []
    stop = threading.Event()
    thread = threading.Thread(target=probe, args=(base, stop, idle))
    thread.start()
    time.sleep(2.0)
    stop.set()
    thread.join()
    idle_load = load_average()

    busy: list[float] = []
    answers: list[tuple[int, float]] = []
    stop = threading.Event()
    prober = threading.Thread(target=probe, args=(base, stop, busy))
    viewers = [
        threading.Thread(target=viewer, args=(base, run_id, views, answers)) for _ in range(clients)
    ]
    prober.start()
    time.sleep(0.2)
    started = time.perf_counter()
    for thread in viewers:
        thread.start()
    for thread in viewers:
        thread.join()
    elapsed = time.perf_counter() - started
    stop.set()
    prober.join()
    return {
        "idle": idle,
        "idle_load": idle_load,
        "busy": busy,
        "busy_load": load_average(),
        "views": [s for status, s in answers if status == 200],
        "refused": sum(1 for status, _ in answers if status == 503),
        "other": sorted({status for status, _ in answers if status not in (200, 503)}),
        "elapsed": elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=4, help="Concurrent viewers (K).")
    parser.add_argument("--views", type=int, default=3, help="Views per client.")
    parser.add_argument(
        "--live", action="store_true", help="View the run while it runs (waiting for a worker)."
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tokenbench-bench-"))
    server = start_redis_server()
    env = {
        **os.environ,
        "TOKENBENCH__REDIS__URL": server.url,
        "TOKENBENCH__API__TOKENS": f'["{TOKEN}"]',
    }
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = work / "api.log"
    with log.open("wb") as out:
        plane = subprocess.Popen(
            [sys.executable, "-m", "api", "serve", "--port", str(port), "--db", str(work / "b.db")],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=0.5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or plane.poll() is not None:
                raise RuntimeError(log.read_text(errors="replace")[-4000:])
            time.sleep(0.1)
        with httpx.Client(base_url=base, headers={"authorization": f"Bearer {TOKEN}"}) as client:
            run_id, shards = big_run(client, args.live)
        result = measure(base, run_id, args.clients, args.views)
    finally:
        plane.terminate()
        try:
            plane.wait(15)
        except subprocess.TimeoutExpired:
            plane.kill()
        server.stop()

    table = Table(
        title=f"/healthz while {args.clients} clients view a {shards:,}-shard "
        f"{'live' if args.live else 'stored'} run "
        f"({args.views} views each, loopback)"
    )
    for column in ("measure", "n", "p50", "p99", "max", "load avg 1m / 5m"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    idle, busy, views = result["idle"], result["busy"], result["views"]
    table.add_row(
        "/healthz, no views", str(len(idle)), ms(idle, 0.5), ms(idle, 0.99), ms(idle, 1.0),
        result["idle_load"],
    )  # fmt: skip
    table.add_row(
        "/healthz during the views", str(len(busy)), ms(busy, 0.5), ms(busy, 0.99),
        ms(busy, 1.0), result["busy_load"],
    )  # fmt: skip
    table.add_row(
        "GET /v1/runs/{id} (200)", str(len(views)), ms(views, 0.5), ms(views, 0.99),
        ms(views, 1.0), result["busy_load"],
    )  # fmt: skip
    Console(width=120).print(table)
    mean = statistics.mean(views) if views else 0.0
    print(
        f"views answered 503 (busy): {result['refused']}; other statuses: {result['other']}; "
        f"all views took {result['elapsed']:.1f} s (mean view {mean * 1000:.0f} ms)"
    )


if __name__ == "__main__":
    main()
