"""api/cli/commands/imports.py: a bundle imported (rows on stderr, JSON on stdout with
--format json), again with nothing added, and files that are not bundles refused."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import duckdb
import typer
from typer.testing import CliRunner

from analytics.report.build import build_report
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


IMPORTS = Path(__file__).parents[4] / "data" / "imports"


def test_each_tools_real_files_import_once_and_report(tmp_path: Path) -> None:
    """The real files of every tool (tests/data/imports), through the command, the
    parsing child and the store: one run per result, the same run the second time, and
    a report that names the tool."""
    db = tmp_path / "d.duckdb"
    seen: dict[str, list[str]] = {}
    for folder in sorted(p for p in IMPORTS.iterdir() if p.is_dir()):
        if folder.name in ("tokenbench", "tokenizer"):
            continue
        answer = CliRunner().invoke(app, [str(folder), "--db", str(db), "--format", "json"])
        assert answer.exit_code == 0, answer.stderr
        runs = json.loads(answer.stdout)["runs"]
        assert runs and all(r["added"] for r in runs), folder
        seen[folder.name] = [r["run_id"] for r in runs]
        again = CliRunner().invoke(app, [str(folder), "--db", str(db), "--format", "json"])
        assert [r["run_id"] for r in json.loads(again.stdout)["runs"]] == seen[folder.name]
        assert not any(r["added"] for r in json.loads(again.stdout)["runs"])
    assert set(seen) == {"aiperf", "guidellm", "vllm-bench", "inference-perf", "llmd"}
    con = duckdb.connect(str(db), read_only=True)
    try:
        tools = dict(con.execute("SELECT tool, count(*) FROM run_imports GROUP BY tool").fetchall())
        report = build_report(con, seen["aiperf"][0])
    finally:
        con.close()
    assert tools == {tool: len(ids) for tool, ids in seen.items()}
    assert report.imported is not None and report.imported["tool"] == "aiperf"
    assert report.stages[0]["requests"] == 32
