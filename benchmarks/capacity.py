"""Capacity found by ``load.find_capacity`` against the batching simulator, and what early
stopping saved (docs/answers.md).

    python benchmarks/capacity.py [--requests 200] [--duration 10] [--precision 0.1]

For two simulated deployments (Llama 3.1 8B FP8 on one H100 with 4 and with 8 sequences
at once, 15 ms step overhead; 16-token prompts, 8-token answers) it runs `tokenbench run`
(embedded Redis and worker) with a capacity search at p90 TTFT ≤ 500 ms and constant
arrivals, and prints per deployment:

- the capacity the simulator's own model predicts for one stage of that length (the
  scheduler replayed on virtual time, judged by the same Wilson rule:
  ``workers/simulator/capacity.py``) and the bracket the search found;
- the stages the search ran and the requests it sent, against the requests its stages
  planned (what the early ends saved: saturated probes, verdicts decided early) and
  against a fixed grid that reaches the same precision: a geometric grid from the
  synchronous to the throughput rate in steps of ``--precision``, every stage run whole.

Then one closed-loop stage with ``stop_when`` (p99 TTFT within ±10 %) against its planned
requests. Requests are what a paid API bills: fewer is the point.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from analytics.decide.capacity_search import region_verdict  # noqa: E402  # noqa: E402
from scenarios.providers.simulate import SimulateSpec  # noqa: E402  # noqa: E402
from workers.simulator.capacity import model_capacity, stage_ttfts_ms  # noqa: E402

PROMPT, OUTPUT, SLO_MS, ATTAINMENT = 16, 8, 500.0, 0.9


def simulate(max_batch: int) -> dict[str, Any]:
    return {
        "model": "llama-3.1-8b", "quant": "fp8", "hardware": "h100", "gpus": 1,
        "max_batch": max_batch, "step_overhead_ms": 15, "context": 2048,
    }  # fmt: skip


def scenario(name: str, sim: dict[str, Any], load: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "providers": [{"name": "sim", "kind": "simulated", "simulate": sim}],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": PROMPT},
                    "output_tokens": {"dist": "fixed", "value": OUTPUT},
                }
            ],
            "calibrate": False,
        },
        "load": load,
    }


def run(document: dict[str, Any], work: Path) -> dict[str, Any]:
    """`tokenbench run` in a subprocess; its JSON report."""
    path = work / f"{document['name']}.yaml"
    path.write_text(yaml.safe_dump(document))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH__")}
    done = subprocess.run(
        [sys.executable, "-m", "api", "run", str(path), "--db", str(work / "b.duckdb"),
         "--format", "json"],
        capture_output=True, text=True, env=env, cwd=REPO, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"tokenbench run failed ({done.returncode}):\n{done.stderr[-2000:]}")
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def predicted(sim: dict[str, Any], requests: int, duration_s: float) -> float:
    spec = SimulateSpec(**sim)

    def holds(rate: float) -> bool:
        ttfts = stage_ttfts_ms(spec, rate, requests, duration_s, PROMPT, OUTPUT)
        met = sum(1 for t in ttfts if t <= SLO_MS)
        return region_verdict(met, len(ttfts), ATTAINMENT, 0.975) == "pass"

    return model_capacity(holds, 5.0, 500.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200, help="requests per stage")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per stage")
    parser.add_argument("--precision", type=float, default=0.1, help="the search's precision")
    args = parser.parse_args()
    console = Console(width=140)
    table = Table(title="capacity at p90 TTFT ≤ 500 ms (constant arrivals)")
    for header in (
        "deployment", "model predicts", "found (bracket)", "stages", "requests sent",
        "planned by its stages", "saved by early ends", "fixed grid: stages", "grid requests",
    ):  # fmt: skip
        table.add_column(header, justify="right")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for batch in (4, 8):
            sim = simulate(batch)
            load = {
                "find_capacity": {
                    "slo": {"ttft_ms": SLO_MS}, "attainment": ATTAINMENT,
                    "precision": args.precision, "arrival": "constant",
                    "throughput_concurrency": 4 * batch, "max_stages": 14,
                },
                "requests_per_level": args.requests,
                "duration_s": args.duration,
                "saturation": {"min_s": 3},
            }  # fmt: skip
            report = run(scenario(f"capacity-b{batch}", sim, load), work)
            (answer,) = report["answers"]["capacity"]
            rows = sorted(report["stages"], key=lambda r: r["stage"])
            sent = sum(r["requests"] for r in rows)
            saved = report["answers"]["requests_saved"] or 0
            sync, top = rows[0]["request_rate"], rows[1]["request_rate"]
            grid = 2 + math.ceil(math.log(top / sync) / math.log(1 + args.precision))
            table.add_row(
                f"8B FP8 · 1×H100 · batch {batch}",
                f"{predicted(sim, args.requests, args.duration):.2f} req/s",
                f"{answer['capacity']:.2f} ({answer['low']:g}–{answer['high']:g})"
                if answer["high"] is not None else str(answer["state"]),
                str(len(rows)),
                f"{sent:,}",
                f"{sent + saved:,}",
                f"{saved:,}",
                str(grid),
                f"{rows[0]['requests'] + rows[1]['requests'] + (grid - 2) * args.requests:,}",
            )  # fmt: skip
        console.print(table)
        planned = 4000
        stop = {
            "concurrency": [4], "requests_per_level": planned,
            "stop_when": {"metric": "ttft", "quantile": 0.99, "rel_ci": 0.1, "min_requests": 200},
        }  # fmt: skip
        report = run(scenario("stop-when", simulate(4), stop), work)
        (row,) = report["stages"]
        ended = report["answers"]["ended"]
        why = ended[0]["reason"] if ended else "ran to its end"
        console.print(
            f"stop_when p99 TTFT ±10 %: {row['requests']:,} of {planned:,} planned requests "
            f"sent ({why})"
        )


if __name__ == "__main__":
    main()
