"""A run split over two live worker processes of a region (``TOKENBENCH__WORKER__PROCESSES=2``
for the embedded run): every planned request recorded exactly once, and the report at the
stage's level, not at a part's share."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest
import yaml

from tests.conftest import CliResult

pytestmark = pytest.mark.integration

LEVEL, REQUESTS = 128, 384


def test_a_stage_split_over_two_worker_processes_records_each_request_once(
    tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    scenario = {
        "name": "split",
        "providers": [
            {"name": "sim", "kind": "simulated", "simulate": {"ttft_ms": 20, "itl_ms": 2}}
        ],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 16},
                    "output_tokens": {"dist": "fixed", "value": 8},
                }
            ]
        },
        "load": {"concurrency": [LEVEL], "requests_per_level": REQUESTS},
    }
    path = tmp_path / "split.yaml"
    path.write_text(yaml.safe_dump(scenario))
    db = tmp_path / "split.duckdb"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH__")}
    env["TOKENBENCH__WORKER__PROCESSES"] = "2"
    result = tokenbench("run", str(path), "--db", str(db), "--format", "json", env=env)
    assert result.code == 0, result.stderr
    report = json.loads(result.stdout[result.stdout.index("{") :])
    assert report["state"] == "finished"
    (row,) = report["stages"]
    assert (row["concurrency"], row["requests"]) == (LEVEL, REQUESTS)
    con = duckdb.connect(str(db), read_only=True)
    shards = con.execute(
        "SELECT shard_id, concurrency, stage_concurrency, state FROM shards ORDER BY shard_id"
    ).fetchall()
    assert shards == [
        ("s0.sim.local.0", LEVEL // 2, LEVEL, "finished"),
        ("s0.sim.local.1", LEVEL // 2, LEVEL, "finished"),
    ]
    counts = con.execute(
        "SELECT count(*), count(DISTINCT seq), min(seq), max(seq) FROM requests"
    ).fetchone()
    assert counts == (REQUESTS, REQUESTS, 0, REQUESTS - 1)
    # One accepted attempt per part: nothing ran twice.
    attempts = con.execute("SELECT count(*) FROM shard_attempts").fetchone()
    assert attempts == (2,)
