"""api/cli/commands/imports.py: a bundle imported (rows on stderr, JSON on stdout with
--format json), again with nothing added, and files that are not bundles refused."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from analytics.store.bundles import export_run
from analytics.store.db import SCHEMA_VERSION, connect
from api.cli.commands.imports import import_command
from tests.support.regional_run import store_regional_run

app = typer.Typer()
app.command()(import_command)


def _bundle(tmp_path: Path) -> Path:
    db = tmp_path / "s.duckdb"
    store_regional_run(db, "r1")
    con = connect(db, read_only=True)
    export_run(con, "r1", tmp_path / "r1.tbz", dt.datetime.now(dt.UTC))
    con.close()
    return tmp_path / "r1.tbz"


def test_import_then_again(tmp_path: Path) -> None:
    bundle, db = _bundle(tmp_path), tmp_path / "d.duckdb"
    first = CliRunner().invoke(app, [str(bundle), "--db", str(db), "--format", "json"])
    assert first.exit_code == 0, first.output
    added = json.loads(first.stdout)["rows_added"]
    assert added > 0
    assert (
        f"imported run r1 (bundle schema v{SCHEMA_VERSION}): {added} rows added, 0 already"
        in first.stderr
    )
    again = CliRunner().invoke(app, [str(bundle), "--db", str(db)])
    assert again.exit_code == 0
    assert again.stdout == ""
    assert (
        f"already stored: run r1 (bundle schema v{SCHEMA_VERSION}): 0 rows added, {added}"
        in again.stderr
    )


def test_a_file_no_tool_wrote_is_named_as_such(tmp_path: Path) -> None:
    other = tmp_path / "notes.json"
    other.write_text('{"hello": "world"}\n')
    answer = CliRunner().invoke(app, [str(other), "--db", str(tmp_path / "d.duckdb")])
    assert answer.exit_code == 2
    assert "not a result file of a tool tokenbench imports (notes.json)" in answer.stderr
    assert not (tmp_path / "d.duckdb").exists()


def test_a_missing_file_exits_2(tmp_path: Path) -> None:
    answer = CliRunner().invoke(app, [str(tmp_path / "none.tbz")])
    assert answer.exit_code == 2
    assert "no file" in answer.stderr
