"""The quick-start path: no Redis configured, everything started and stopped by the CLI."""

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


def test_embedded_run_starts_redis_and_a_worker_then_cleans_up(
    tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    scenario = {
        "name": "embedded",
        "providers": [
            {"name": "sim", "kind": "simulated", "simulate": {"ttft_ms": 30, "itl_ms": 3}}
        ],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 32},
                    "output_tokens": {"dist": "fixed", "value": 16},
                }
            ]
        },
        "load": {"concurrency": [2], "requests_per_level": 10},
    }
    path = tmp_path / "embedded.yaml"
    path.write_text(yaml.safe_dump(scenario))
    db = tmp_path / "e.duckdb"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH__")}
    result = tokenbench("run", str(path), "--db", str(db), "--format", "json", env=env)
    assert result.code == 0, result.stderr
    report = json.loads(result.stdout[result.stdout.index("{") :])
    assert report["state"] == "finished"
    assert [row["requests"] for row in report["stages"]] == [10]
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*), min(region) FROM requests").fetchone() == (10, "local")


def test_bad_scenario_exits_2_with_field_path_and_line(
    tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "name: bad\n"
        "providers:\n"
        "  - name: x\n"
        "    kind: simulated\n"
        "    simulate: {ttft_ms: -5}\n"
        "workload: {mix: [{prompt_tokens: {dist: fixed, value: 1}, output_tokens: {dist: fixed, value: 1}}]}\n"
        "load: {concurrency: [1], requests_per_level: 1}\n"
    )
    result = tokenbench("run", str(path), "--db", str(tmp_path / "x.duckdb"))
    assert result.code == 2
    assert f"{path}:5: providers.0.simulate.ttft_ms" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "x.duckdb").exists()
