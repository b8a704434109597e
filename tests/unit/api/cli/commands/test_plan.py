"""``tokenbench plan`` through typer: tables, JSON, and exit code 2 for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from api.cli.commands.plan import plan
from tests.support.builders import NEW_MODEL

app = typer.Typer()
app.command()(plan)
runner = CliRunner()


PLAN_405B_FP8_H200 = [
    "--model",
    "llama-3.1-405b",
    "--quant",
    "fp8",
    "--hardware",
    "h200",
    "--gpus",
    "8",
    "--context",
    "8192",
]


def test_table_output_has_every_section() -> None:
    result = runner.invoke(app, PLAN_405B_FP8_H200, env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    for text in ("Memory", "KV per token", "516,096 B", "Decode vs batch", "Across the catalog"):
        assert text in result.stdout
    assert "mi300x" in result.stdout
    assert "OOM" in result.stdout


def test_json_output() -> None:
    result = runner.invoke(app, [*PLAN_405B_FP8_H200, "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["deployment"]["hardware"] == "h200"
    assert doc["memory"]["fits"] is True
    assert doc["memory"]["kv_bytes_per_token"] == 516_096
    batches = [row["batch"] for row in doc["decode"]]
    assert batches[0] == 1
    assert batches[-1] <= doc["memory"]["max_sequences"]
    aggregates = [row["aggregate_tok_s"] for row in doc["decode"]]
    assert aggregates == sorted(aggregates)
    costs = [row["usd_per_million_output_tokens"] for row in doc["decode"]]
    assert costs == sorted(costs, reverse=True)
    cells = {(c["hardware"], c["gpus"]): c["status"] for c in doc["compatibility"]}
    assert cells[("h100", 8)] == "fits"
    assert cells[("h100", 4)] == "oom"
    assert cells[("m3-ultra", 8)] == "unsupported"
    assert {gpus for _, gpus in cells} == {1, 2, 4, 8}


def test_fp16_405b_on_h100_is_oom_but_still_shows_the_matrix() -> None:
    args = ["--model", "llama-3.1-405b", "--quant", "fp16", "--hardware", "h100", "--gpus", "8"]
    result = runner.invoke(app, args, env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert "does not fit" in result.stdout
    assert "Across the catalog" in result.stdout
    doc = json.loads(runner.invoke(app, [*args, "--format", "json"]).stdout)
    assert doc["decode"] == []
    assert doc["memory"]["fits"] is False


def test_price_override_and_batches() -> None:
    args = [*PLAN_405B_FP8_H200, "--gpu-hour-usd", "2", "--batch", "1", "--batch", "16"]
    doc = json.loads(runner.invoke(app, [*args, "--format", "json"]).stdout)
    assert doc["gpu_hour_usd"] == 2
    assert doc["price_source"] == "--gpu-hour-usd"
    assert [row["batch"] for row in doc["decode"]] == [1, 16]
    first = doc["decode"][0]
    assert first["usd_per_million_output_tokens"] == pytest.approx(
        2 * 8 / (first["aggregate_tok_s"] * 3600) * 1e6
    )


def test_unpriced_hardware_has_no_cost() -> None:
    args = ["--model", "llama-3.1-8b", "--hardware", "m3-ultra", "--format", "json"]
    doc = json.loads(runner.invoke(app, args).stdout)
    assert doc["gpu_hour_usd"] is None
    assert all(row["usd_per_million_output_tokens"] is None for row in doc["decode"])


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--hardware", "h1000"], "valid ids: h100, h200"),
        (["--model", "gpt-5"], "llama-3.1-405b"),
        (["--quant", "q2"], "q4_k_m"),
        (["--kv-dtype", "int3"], "fp8"),
        (["--hardware", "m3-ultra", "--gpus", "2"], "at most 1"),
        (["--context", "200000"], "context must be"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(args: list[str], expected: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert expected in result.stderr


def test_user_catalog_file(tmp_path: Path) -> None:
    user = tmp_path / "catalog.yaml"
    user.write_text(NEW_MODEL, encoding="utf-8")
    args = ["--model", "qwen2.5-72b", "--catalog", str(user), "--format", "json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["deployment"]["model"] == "qwen2.5-72b"


def test_invalid_user_catalog_exits_2(tmp_path: Path) -> None:
    user = tmp_path / "catalog.yaml"
    user.write_text("gpus: []\n", encoding="utf-8")
    result = runner.invoke(app, ["--catalog", str(user)])
    assert result.exit_code == 2
    assert "unknown section" in result.stderr
