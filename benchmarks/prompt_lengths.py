"""Planned vs server-reported prompt length, by how prompts are sized (docs/lengths.md).

    python benchmarks/prompt_lengths.py [--tokenizer tokenizer.json] [--requests 40]

Three `tokenbench run`s of the same scenario (embedded Redis and worker, closed loop at
concurrency 1 then 4), against three simulated endpoints that count prompt tokens their
own way: one word a token (`sim-words`), 1.3 tokens a word (`sim-ratio`, English BPE) and a
real tokenizer (`sim-tokenizer`: the one given, else a tiny byte-level BPE trained here on
the prompt words, ~2.5 tokens a word). The runs size prompts with one word a token and
no calibration, with calibration from the server's usage (the default), and exactly with
the same tokenizer (`workload.tokenizer`). The table shows, per server and stage, the
mean planned and reported prompt tokens and the mean relative error after warm-up, the
warm-up's own error and the tokens per word calibration settled on.
"""

from __future__ import annotations

import argparse
import json
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

from tests.support.counting_servers import counting_servers_scenario  # noqa: E402
from tests.support.tiny_tokenizer import train_bpe  # noqa: E402

PATHS = {
    "1 word/token": {"calibrate": False},
    "calibrated": {},
    "tokenizer": None,  # set to the tokenizer path
}


def scenario(tokenizer: Path, workload: dict[str, Any], requests: int) -> dict[str, Any]:
    """Three servers counting differently, one length mix, two stages."""
    return counting_servers_scenario("prompt-lengths", tokenizer, workload, requests)


def run(path: Path, db: Path) -> dict[str, Any]:
    """`tokenbench run` in a subprocess; its JSON report."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH__")}
    env["HF_HUB_OFFLINE"] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "api", "run", str(path), "--db", str(db), "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"tokenbench run failed ({done.returncode}):\n{done.stderr[-2000:]}")
    report: dict[str, Any] = json.loads(done.stdout[done.stdout.index("{") :])
    return report


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:+.2f} %"


def main() -> None:
    """Run the three sizings and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokenizer", type=Path, help="a tokenizer.json (default: train one)")
    parser.add_argument("--requests", type=int, default=40, help="requests per stage")
    args = parser.parse_args()
    console = Console(width=120)  # whole numbers, in a pipe too
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        tokenizer = args.tokenizer or train_bpe(work / "tokenizer.json")
        table = Table(title="prompt tokens: planned vs server-reported (mean over ok requests)")
        for column in ("sizing", "server counts", "stage", "planned", "reported", "error"):
            table.add_column(
                column, justify="left" if column in ("sizing", "server counts") else "right"
            )
        table.add_column("warm-up error (n)", justify="right")
        table.add_column("tok/word", justify="right")
        for sizing, workload in PATHS.items():
            extra = {"tokenizer": {"path": str(tokenizer)}} if workload is None else workload
            path = work / f"{len(table.rows)}.yaml"
            path.write_text(yaml.safe_dump(scenario(tokenizer, extra, args.requests)))
            report = run(path, work / f"{len(table.rows)}.duckdb")
            rows = sorted(report["stages"], key=lambda r: (r["provider"], r["stage"]))
            for row in rows:
                warmup = row.get("prompt_length_warmup_error_pct")
                per_word = row.get("prompt_tokens_per_word")
                table.add_row(
                    sizing,
                    row["provider"],
                    str(row["stage"]),
                    f"{row['prompt_tokens_planned_mean']:.0f}",
                    f"{row['prompt_tokens_reported_mean']:.0f}",
                    _pct(row["prompt_length_error_pct"]),
                    "–" if warmup is None else f"{_pct(warmup)} ({row['prompt_warmup_requests']})",
                    "–" if per_word is None else f"{per_word:.3f}",
                )
            table.add_section()
        console.print(table)
    load = os.getloadavg()
    console.print(f"load average while it ran: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
