"""api/cli/commands/spend.py on a local DuckDB file (``--db``): the ledger per provider,
day or run, as a table or JSON, and bad days refused."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from analytics.store.db import connect
from api.cli.commands.spend import spend
from api.control.spend import update_ledger
from tests.support.builders import REPORT_SCENARIO, ok_result, store_run

app = typer.Typer()
app.command()(spend)


def _db(tmp_path: Path) -> Path:
    path = tmp_path / "spend.duckdb"
    con = connect(path)
    results = [ok_result(i * 10**9, 10.0, [1.0] * 99) for i in range(2)]
    store_run(con, "r1", REPORT_SCENARIO, {("api", 0): results})
    update_ledger(con, "r1", "default")
    con.close()
    return path


def test_ledger_as_json_and_table(tmp_path: Path) -> None:
    db = _db(tmp_path)
    answer = CliRunner().invoke(app, ["--db", str(db), "--format", "json", "--since", "2000-01-01"])
    assert answer.exit_code == 0, answer.output
    got = json.loads(answer.output)
    assert got["team"] == "default" and got["rows"][0]["provider"] == "api"
    assert got["total_usd"] > 0 and got["budget"]["monthly_budget_usd"] is None
    table = CliRunner().invoke(app, ["--db", str(db), "--group", "run", "--since", "2000-01-01"])
    assert table.exit_code == 0 and "r1" in table.output and "unlimited" in table.output


def test_a_bad_day_is_bad_input(tmp_path: Path) -> None:
    answer = CliRunner().invoke(app, ["--db", str(_db(tmp_path)), "--since", "yesterday"])
    assert answer.exit_code == 2 and "YYYY-MM-DD" in answer.output
