"""The dry-run cost bound against the real spend, for runs of different shapes.

Each scenario (fixed lengths, where the bound is tightest; a closed loop counted; an
open loop bounded by its duration; a sweep; 3-turn sessions) runs on the simulator with
a token price (`tokenbench run`, the embedded stack, its own DuckDB file). Its bound is
the one stored at submission (``run_cost_bounds``: the plan ``tokenbench run --dry-run``
prints), its spend the ledger's (recorded usage × list price, ``spend_ledger``). The
bound must never be below the spend; the ratio says how loose it is, the plan's stage
bounds say why.

Usage: python benchmarks/cost_bound.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from analytics.store.db import connect

PRICING = {"input_per_mtok": 2.5, "output_per_mtok": 10.0}
SIMULATE = {"ttft_ms": 20, "itl_ms": 2}
MIX = [
    {
        "weight": 3,
        "prompt_tokens": {"dist": "uniform", "min": 50, "max": 300},
        "output_tokens": {"dist": "uniform", "min": 10, "max": 80},
    },
    {
        "weight": 1,
        "prompt_tokens": {"dist": "lognormal", "mean": 600, "sigma": 0.4, "max": 2000},
        "output_tokens": {"dist": "fixed", "value": 64},
    },
]


def scenario(name: str, load: dict[str, Any], **workload: Any) -> dict[str, Any]:
    return {
        "name": name,
        "providers": [
            {"name": "paid", "kind": "simulated", "simulate": SIMULATE, "pricing": PRICING}
        ],
        "workload": {"mix": MIX, **workload},
        "load": load,
    }


FIXED = [
    {
        "prompt_tokens": {"dist": "fixed", "value": 200},
        "output_tokens": {"dist": "fixed", "value": 50},
    }
]

SHAPES: list[tuple[str, dict[str, Any]]] = [
    (
        "closed loop, fixed lengths",
        {
            **scenario("fixed", {"concurrency": [4], "requests_per_level": 40}),
            "workload": {"mix": FIXED},
        },
    ),
    ("closed loop, counted", scenario("closed", {"concurrency": [2, 8], "requests_per_level": 40})),
    (
        "open loop, duration-bound",
        scenario("open", {"rate": {"rps": [10, 20]}, "duration_s": 6}),
    ),
    ("sweep", scenario("sweep", {"sweep": {"points": 2}, "requests_per_level": 30})),
    (
        "sessions, 3 turns",
        scenario(
            "sessions",
            {"concurrency": [4], "sessions_per_level": 8},
            sessions={"turns": 3},
        ),
    ),
]


def run_one(directory: Path, name: str, data: dict[str, Any]) -> dict[str, Any]:
    """Run one scenario with the embedded stack; its bound, spend and what bounded it."""
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    db = directory / f"{name}.duckdb"
    env = {k: v for k, v in os.environ.items() if k != "TOKENBENCH__REDIS__URL"}
    done = subprocess.run(
        [sys.executable, "-m", "api", "run", str(path), "--db", str(db), "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode not in (0, 1):
        raise RuntimeError(done.stderr[-2000:])
    con = connect(db, read_only=True)
    try:
        (run_id, bound, plan) = con.execute(
            "SELECT run_id, cost_bound_usd, plan FROM run_cost_bounds"
        ).fetchone() or (None, None, None)
        spent, requests, prompt, output = con.execute(
            "SELECT coalesce(sum(usd), 0), "
            "(SELECT count(*) FROM request_records WHERE run_id = ?), "
            "coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0) "
            "FROM spend_ledger WHERE run_id = ?",
            [run_id, run_id],
        ).fetchone() or (0.0, 0, 0, 0)
    finally:
        con.close()
    planned = yaml.safe_load(plan) if plan else {}
    return {
        "bound": bound,
        "spent": float(spent),
        "requests": int(requests),
        "planned_requests": planned.get("requests"),
        "prompt": int(prompt),
        "planned_prompt": planned.get("prompt_tokens"),
        "output": int(output),
        "planned_output": planned.get("output_tokens"),
        "bounded_by": sorted({s["bounded_by"] for s in planned.get("stages", [])}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", type=Path, help="Keep scenarios and databases here.")
    args = parser.parse_args()
    load_before = os.getloadavg()
    console = Console(width=160)
    table = Table(title="dry-run cost bound vs recorded spend (simulator, $2.5/$10 per 1M)")
    for column in (
        "shape",
        "requests (planned)",
        "prompt tok (planned)",
        "output tok (planned)",
        "bound USD",
        "spent USD",
        "bound / spent",
        "bound ≥ spent",
    ):
        table.add_column(column, justify="left" if column == "shape" else "right")
    notes = []
    with tempfile.TemporaryDirectory() as scratch:
        directory = args.keep or Path(scratch)
        directory.mkdir(parents=True, exist_ok=True)
        for shape, data in SHAPES:
            got = run_one(directory, data["name"], data)
            bound, spent = got["bound"], got["spent"]
            ok = bound is not None and bound >= spent
            table.add_row(
                shape,
                f"{got['requests']:,} ({got['planned_requests']:,})",
                f"{got['prompt']:,} ({got['planned_prompt']:,})",
                f"{got['output']:,} ({got['planned_output']:,})",
                "-" if bound is None else f"{bound:.6f}",
                f"{spent:.6f}",
                "-" if bound is None or spent == 0 else f"{bound / spent:.2f}×",
                "yes" if ok else "NO",
            )
            notes.append(f"{shape}: {'; '.join(got['bounded_by'])}")
    console.print(table)
    for note in notes:
        console.print(note, highlight=False)
    load_after = os.getloadavg()
    console.print(
        f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} "
        f"({os.cpu_count()} cores)",
        highlight=False,
    )


if __name__ == "__main__":
    main()
