"""Exact prompt lengths through a real `tokenbench run` (embedded Redis, a real worker,
simulated endpoints counting prompt tokens their own way, DuckDB): with the workload's
tokenizer the planned length is what the server counts; without one, calibration from
the server's `usage` brings the mean error within 2 % after warm-up."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from tests.conftest import CliResult
from tests.support.counting_servers import counting_servers_scenario
from tests.support.tiny_tokenizer import train_bpe

pytestmark = pytest.mark.integration


def _scenario(tokenizer: Path, workload: dict[str, Any]) -> dict[str, Any]:
    return counting_servers_scenario("exact-lengths", tokenizer, workload, requests=40)


def _run(
    tmp_path: Path, tokenbench: Callable[..., CliResult], scenario: dict[str, Any], name: str
) -> tuple[dict[str, Any], duckdb.DuckDBPyConnection]:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(scenario))
    db = tmp_path / f"{name}.duckdb"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBENCH__")}
    env["HF_HUB_OFFLINE"] = "1"  # never the network
    result = tokenbench("run", str(path), "--db", str(db), "--format", "json", env=env)
    assert result.code == 0, result.stderr
    report = json.loads(result.stdout[result.stdout.index("{") :])
    assert report["state"] == "finished"
    return report, duckdb.connect(str(db), read_only=True)


def _rows(report: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(row["provider"], row["stage"]): row for row in report["stages"]}


def test_calibration_from_the_server_without_a_tokenizer(
    tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    tokenizer = train_bpe(tmp_path / "tokenizer.json")
    report, con = _run(tmp_path, tokenbench, _scenario(tokenizer, {}), "calibrated")
    rows = _rows(report)
    for provider in ("sim-words", "sim-ratio", "sim-tokenizer"):
        first, second = rows[(provider, 0)], rows[(provider, 1)]
        for row in (first, second):
            assert row["prompt_length_source"] == "calibrated", row
            assert abs(row["prompt_length_error_pct"]) < 2.0, row
        # Warm-up happens once per provider: the next stage starts calibrated.
        assert first["prompt_warmup_requests"] >= 8
        assert second["prompt_warmup_requests"] == 0
    # One word a token was far off where the server counts otherwise (the warm-up).
    assert rows[("sim-words", 0)]["prompt_length_warmup_error_pct"] == pytest.approx(0, abs=0.1)
    assert rows[("sim-ratio", 0)]["prompt_length_warmup_error_pct"] == pytest.approx(30, abs=1)
    assert rows[("sim-tokenizer", 0)]["prompt_length_warmup_error_pct"] > 50
    assert rows[("sim-ratio", 1)]["prompt_tokens_per_word"] == pytest.approx(1.3, rel=0.01)
    # Every record keeps the calibration it was planned with.
    calibrated = con.execute(
        "SELECT count(*), min(prompt_tokens_per_word) FROM requests "
        "WHERE provider = 'sim-ratio' AND planned_prompt_source = 'calibrated'"
    ).fetchone()
    assert calibrated is not None and calibrated[0] >= 70 and calibrated[1] > 1.2


def test_the_workload_tokenizer_makes_prompts_of_exactly_the_planned_length(
    tmp_path: Path, tokenbench: Callable[..., CliResult]
) -> None:
    tokenizer = train_bpe(tmp_path / "tokenizer.json")
    scenario = _scenario(tokenizer, {"tokenizer": {"path": str(tmp_path)}})  # its directory
    report, con = _run(tmp_path, tokenbench, scenario, "exact")
    exact = con.execute(
        "SELECT count(*), count(*) FILTER (prompt_tokens = planned_prompt_tokens), "
        "min(planned_prompt_source), max(planned_prompt_source) FROM requests "
        "WHERE provider = 'sim-tokenizer' AND token_count_source = 'usage'"
    ).fetchone()
    assert exact == (80, 80, "tokenizer", "tokenizer")
    rows = _rows(report)
    assert rows[("sim-tokenizer", 0)]["prompt_length_error_pct"] == 0
    # A server with another tokenizer counts otherwise: the error says so.
    assert abs(rows[("sim-ratio", 0)]["prompt_length_error_pct"]) > 10
    # The local file travelled as a dataset, as an uploaded one does.
    kinds = con.execute("SELECT kinds FROM datasets").fetchall()
    assert kinds == [(["tokenizer"],)]
