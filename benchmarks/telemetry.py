"""What server telemetry costs (docs/telemetry.md): parsing, storing, and the measurement.

    python benchmarks/telemetry.py [--requests 400] [--concurrency 64] [--skip-runs]

1. Parse: CPU per scrape of a synthetic vLLM answer (its gauges and counters plus the
   histograms that make up most of a real one: 1 and 8 models), read the way the worker
   does (only the lines of known names parsed) and, for comparison, fully parsed by
   ``prometheus_client``.
2. Store: scrapes per second into DuckDB through ``ingest_scrapes`` (entries of 10
   scrapes, one or 100 entries a call).
3. Measure: two `tokenbench run`s of the same closed-loop scenario against the fixed-
   latency simulator (TTFT 50 ms, 5 ms per token), without and with ``metrics_url``
   scraped every 0.25 s, alternating ``--repeat`` times; TTFT p50/p99 and TPOT p50.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from analytics.store.db import connect  # noqa: E402
from analytics.telemetry.ingest import ingest_scrapes  # noqa: E402
from scenarios.wire.server_metrics import scrapes_to_ipc  # noqa: E402
from workers.shard.telemetry import parse_body  # noqa: E402

_HISTOGRAMS = (
    "time_to_first_token_seconds",
    "time_per_output_token_seconds",
    "e2e_request_latency_seconds",
    "request_queue_time_seconds",
    "request_prefill_time_seconds",
    "request_decode_time_seconds",
    "request_prompt_tokens",
    "request_generation_tokens",
)


def vllm_answer(models: int, buckets: int = 30) -> bytes:
    """A vLLM-like exposition: per model its gauges, counters and histograms."""
    lines: list[str] = []
    for m in range(models):
        label = f'model_name="meta-llama/Llama-3.1-8B-Instruct-{m}",engine="0"'
        for name, value in (
            ("vllm:num_requests_running", 12),
            ("vllm:num_requests_waiting", 3),
            ("vllm:kv_cache_usage_perc", 0.42),
            ("vllm:prompt_tokens_total", 123456),
            ("vllm:generation_tokens_total", 654321),
        ):
            lines += [f"# HELP {name} x.", f"# TYPE {name} gauge", f"{name}{{{label}}} {value}"]
        for histogram in _HISTOGRAMS:
            name = f"vllm:{histogram}"
            lines += [f"# HELP {name} x.", f"# TYPE {name} histogram"]
            lines += [
                f'{name}_bucket{{{label},le="{0.001 * 2**b:g}"}} {b * 10}' for b in range(buckets)
            ]
            lines += [f'{name}_bucket{{{label},le="+Inf"}} 999', f"{name}_count{{{label}}} 999"]
            lines += [f"{name}_sum{{{label}}} 12.5"]
    return ("\n".join(lines) + "\n").encode()


def _cpu_ms(call: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.process_time()
        call()
        times.append((time.process_time() - started) * 1000)
    return statistics.median(times)


def parse_rows() -> list[list[str]]:
    rows = []
    for models in (1, 8):
        body = vllm_answer(models)
        kept = _cpu_ms(lambda body=body: parse_body(body), 50)
        full = _cpu_ms(
            lambda body=body: [
                s for f in text_string_to_metric_families(body.decode()) for s in f.samples
            ],
            10,
        )
        rows.append([f"{models}", f"{len(body) / 1024:,.0f}", f"{kept:.2f}", f"{full:.1f}"])
    return rows


def ingest_rate(per_call: int, scrapes: int = 2000) -> float:
    """Scrapes a second stored, ``per_call`` entries (of 10 scrapes each) per call, as
    the control plane stores one stream read."""
    with tempfile.TemporaryDirectory() as tmp:
        con = connect(Path(tmp) / "t.duckdb")
        samples = [
            {"metric": "vllm:num_requests_running", "labels": [("model_name", "m")], "value": 1.0}
        ] * 5
        base = time.time_ns()
        payloads = []
        for first in range(0, scrapes, 10):
            rows: list[dict[str, object]] = [
                {
                    "run_id": "r", "stage": 0, "provider": "p", "region": "local",
                    "shard_id": "s", "attempt": 1, "worker": "w", "scrape_seq": seq,
                    "scraped_at": base + seq * 10**9, "duration_ns": 1, "status": "ok",
                    "http_status": 200, "error_message": None, "body_bytes": 1,
                    "series_dropped": 0, "samples": samples,
                }
                for seq in range(first, first + 10)
            ]  # fmt: skip
            payloads.append(scrapes_to_ipc(rows))
        started = time.perf_counter()
        for first in range(0, len(payloads), per_call):
            ingest_scrapes(con, payloads[first : first + per_call])
        return scrapes / (time.perf_counter() - started)


def measured(tmp: Path, scrape: bool, requests: int, concurrency: int) -> dict[str, float]:
    provider: dict[str, Any] = {
        "name": "sim",
        "kind": "simulated",
        "simulate": {"ttft_ms": 50, "itl_ms": 5},
    }
    if scrape:
        provider |= {"metrics_url": "/metrics", "metrics_interval_s": 0.25}
    scenario = {
        "name": "telemetry-cost",
        "providers": [provider],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 32},
                    "output_tokens": {"dist": "fixed", "value": 64},
                }
            ]
        },
        "load": {"concurrency": [concurrency], "requests_per_level": requests},
    }
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / f"s-{scrape}.yaml"
    path.write_text(yaml.safe_dump(scenario))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH__")}
    done = subprocess.run(
        [sys.executable, "-m", "api", "run", str(path), "--db", str(tmp / f"{scrape}.duckdb"),
         "--format", "json"],
        capture_output=True, text=True, env=env, cwd=REPO, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"tokenbench run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    report = json.loads(done.stdout[done.stdout.index("{") :])
    (stage,) = report["stages"]
    scrapes = sum(r["scrapes"] for r in report["server_metrics"]["scrapes"])
    return {
        "ttft_p50": stage["ttft_p50_ms"],
        "ttft_p99": stage["ttft_p99_ms"],
        "tpot_p50": stage["tpot_p50_ms"],
        "scrapes": scrapes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, alternating")
    parser.add_argument("--skip-runs", action="store_true", help="parse and store only")
    args = parser.parse_args()
    console = Console()
    table = Table(title="Parsing one scrape (CPU ms, median)")
    for header in ("models", "answer KiB", "known lines only", "every line"):
        table.add_column(header, justify="right")
    for row in parse_rows():
        table.add_row(*row)
    console.print(table)
    for per_call in (1, 100):
        rate = ingest_rate(per_call)
        console.print(
            f"ingest: {rate:,.0f} scrapes/s into DuckDB, {per_call} entries of 10 scrapes a call"
        )
    if args.skip_runs:
        return
    runs = Table(
        title=f"Measurement with and without scraping (c={args.concurrency}, "
        f"{args.requests} requests, {args.repeat} runs each, alternating; simulator TTFT "
        "50 ms, 5 ms a token)"
    )
    for header in ("metrics_url", "run", "scrapes", "TTFT p50", "TTFT p99", "TPOT p50"):
        runs.add_column(header, justify="right")
    seen: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(args.repeat):
            for scrape in (False, True):
                got = measured(Path(tmp) / f"{index}", scrape, args.requests, args.concurrency)
                seen[scrape].append(got)
    for scrape, results in seen.items():
        median = {key: statistics.median(r[key] for r in results) for key in results[0]}
        for label, got in [*((str(i + 1), r) for i, r in enumerate(results)), ("median", median)]:
            runs.add_row(
                "every 0.25 s" if scrape else "none",
                label,
                f"{got['scrapes']:.0f}",
                f"{got['ttft_p50']:.2f} ms",
                f"{got['ttft_p99']:.2f} ms",
                f"{got['tpot_p50']:.3f} ms",
            )
    console.print(runs)


if __name__ == "__main__":
    main()
