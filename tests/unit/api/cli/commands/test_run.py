"""api/cli/commands/run.py, before anything starts: on the embedded default, local workers
inherit this environment, so a provider's key variable that is unset, or that names a
tokenbench setting, is bad input (exit 2) before Redis, workers or the database."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from analytics.store.db import connect
from api.cli.commands.run import run
from scenarios.settings import get_settings

app = typer.Typer()
app.command()(run)  # the only command: invoked with its arguments alone


@pytest.fixture(autouse=True)
def embedded_default(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No Redis configured: ``run`` would start its own, and local workers."""
    monkeypatch.delenv("TOKENBENCH__REDIS__URL", raising=False)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _scenario(tmp_path: Path, key_variable: str) -> Path:
    path = tmp_path / "scenario.yaml"
    data = {
        "name": "keys",
        "providers": [
            {"name": "sim", "kind": "simulated"},
            {
                "name": "hosted",
                "kind": "openai",
                "base_url": "https://api.example.com/v1",
                "model": "m",
                "api_key_env": key_variable,
            },
        ],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 4},
                    "output_tokens": {"dist": "fixed", "value": 2},
                }
            ]
        },
        "load": {"concurrency": [1], "requests_per_level": 2},
    }
    path.write_text(yaml.safe_dump(data))
    return path


def test_an_unset_key_variable_is_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RUN_TEST_UNSET_KEY", raising=False)
    db = tmp_path / "results.duckdb"
    shown = CliRunner().invoke(
        app, [str(_scenario(tmp_path, "RUN_TEST_UNSET_KEY")), "--db", str(db)]
    )
    assert shown.exit_code == 2, shown.output
    assert "provider 'hosted': environment variable RUN_TEST_UNSET_KEY is not set" in shown.stderr
    assert not db.exists()  # refused before anything was opened or started


def test_a_tokenbench_setting_is_never_a_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOKENBENCH_RUN_TEST_SECRET", "set-but-reserved")
    db = tmp_path / "results.duckdb"
    shown = CliRunner().invoke(
        app, [str(_scenario(tmp_path, "TOKENBENCH_RUN_TEST_SECRET")), "--db", str(db)]
    )
    assert shown.exit_code == 2, shown.output
    assert "variable TOKENBENCH_RUN_TEST_SECRET is a tokenbench setting" in shown.stderr
    assert "set-but-reserved" not in shown.output
    assert not db.exists()


def test_a_broken_scenario_is_bad_input(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\n")
    shown = CliRunner().invoke(app, [str(broken)])
    assert shown.exit_code == 2
    assert shown.stderr.startswith("invalid scenario")


def test_dry_run_prints_the_plan_and_starts_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "dry",
                "providers": [
                    {
                        "name": "paid",
                        "kind": "simulated",
                        "pricing": {"input_per_mtok": 1.0, "output_per_mtok": 2.0},
                    }
                ],
                "workload": {
                    "mix": [
                        {
                            "prompt_tokens": {"dist": "fixed", "value": 100},
                            "output_tokens": {"dist": "fixed", "value": 50},
                        }
                    ]
                },
                "load": {"concurrency": [1], "requests_per_level": 10},
            }
        )
    )
    db = tmp_path / "dry.duckdb"
    answer = CliRunner().invoke(app, [str(path), "--dry-run", "--db", str(db), "--format", "json"])
    assert answer.exit_code == 0, answer.output
    got = json.loads(answer.output)
    # 10 × (142 × $1 + 50 × $2) per 1M tokens.
    assert got["plan"]["cost_bound_usd"] == pytest.approx(10 * (142 + 100) / 1e6)
    assert got["admitted"] is True
    table = CliRunner().invoke(app, [str(path), "--dry-run", "--db", str(db)])
    assert table.exit_code == 0 and "admitted" in table.output and "paid" in table.output
    con = connect(db, read_only=True)
    assert con.execute("SELECT count(*) FROM runs").fetchone() == (0,)
