"""api/cli/commands/export.py on a local DuckDB file: the bundle written, a line on stderr,
the manifest on stdout with --format json, an unknown run refused."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from api.cli.commands.export import export
from tests.support.regional_run import store_regional_run

app = typer.Typer()
app.command()(export)


def test_export_writes_the_bundle_and_says_so(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    store_regional_run(db, "r1")
    out = tmp_path / "r1.tbz"
    quiet = CliRunner().invoke(app, ["r1", "--db", str(db), "-o", str(out)])
    assert quiet.exit_code == 0, quiet.output
    assert quiet.stdout == ""
    assert "exported run r1" in quiet.stderr
    assert out.stat().st_size > 0
    loud = CliRunner().invoke(app, ["r1", "--db", str(db), "-o", str(out), "--format", "json"])
    manifest = json.loads(loud.stdout)
    assert manifest["run_id"] == "r1"
    assert manifest["format"] == "tokenbench-run-bundle"


def test_an_unknown_run_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    store_regional_run(db, "r1")
    answer = CliRunner().invoke(app, ["nope", "--db", str(db), "-o", str(tmp_path / "x.tbz")])
    assert answer.exit_code == 2
    assert "no run 'nope'" in answer.stderr
    assert not (tmp_path / "x.tbz").exists()
