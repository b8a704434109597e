"""`tokenbench trend` on a real DuckDB file: the table reads at 80 columns, the regression
is named in a sentence, the schedule's own window is used, documents are written as the
REST API serves them, and bad options exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from analytics.store.db import connect
from api.cli.commands.trend import trend
from api.schedules.store import ScheduleStore
from tests.support.analytics_builders import store_trend_runs

app = typer.Typer()
app.command()(trend)
runner = CliRunner()


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    path = tmp_path_factory.mktemp("trend-cli") / "runs.duckdb"
    con = connect(path)
    schedule = ScheduleStore(con).add(
        name="nightly", scenario_id="sc-1", cron="0 * * * *", timezone="UTC", overrides=None,
        wait_for_workers=False, webhook_url=None, trend_window=2, min_change=0.1,
    )  # fmt: skip
    store_trend_runs(con, [20.0, 20.2, 20.4, 75.0], schedule_id=schedule.schedule_id)
    con.close()
    return path, schedule.schedule_id


def test_the_table_reads_at_80_columns_and_names_the_regression(db: tuple[Path, str]) -> None:
    path, schedule_id = db
    result = runner.invoke(
        app, ["--schedule", schedule_id, "--db", str(path)], env={"COLUMNS": "80"}
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert any("REGRESSION" in line and "TTFT p50" in line for line in lines)
    assert any(
        line.startswith("api · local · stage 0: regression: TTFT p50 rose") for line in lines
    )
    # The schedule's own window: two earlier runs, not the default five.
    assert "up to 2 earlier runs" in result.output.replace("\n", " ")


def test_a_regression_can_fail_the_command(db: tuple[Path, str]) -> None:
    path, schedule_id = db
    failed = runner.invoke(
        app, ["--schedule", schedule_id, "--db", str(path), "--fail-on-regression"]
    )
    assert failed.exit_code == 1
    earlier = runner.invoke(
        app,
        ["--schedule", schedule_id, "--db", str(path), "--fail-on-regression",
         "--as-of", f"{schedule_id}-r2"],
    )  # fmt: skip
    assert earlier.exit_code == 0, earlier.output


def test_documents_and_history(db: tuple[Path, str], tmp_path: Path) -> None:
    path, schedule_id = db
    data = runner.invoke(app, ["--name", "analytics-test", "--db", str(path), "--format", "json"])
    assert data.exit_code == 0
    assert len(json.loads(data.output)["runs"]) == 4
    out = tmp_path / "trend.csv"
    written = runner.invoke(
        app, ["--schedule", schedule_id, "--db", str(path), "--format", "csv", "-o", str(out)]
    )
    assert written.exit_code == 0 and out.read_text().startswith("run_id,created_at")
    history = runner.invoke(
        app, ["--schedule", schedule_id, "--db", str(path), "--history"], env={"COLUMNS": "100"}
    )
    assert history.exit_code == 0 and f"{schedule_id}-r0" in history.output


def test_bad_options_exit_2(db: tuple[Path, str]) -> None:
    path, schedule_id = db
    assert runner.invoke(app, ["--db", str(path)]).exit_code == 2
    both = runner.invoke(app, ["--schedule", schedule_id, "--name", "x", "--db", str(path)])
    assert both.exit_code == 2
    unknown = runner.invoke(app, ["--schedule", "sch-nope", "--db", str(path)])
    assert unknown.exit_code == 2 and "sch-nope" in unknown.output
    server_and_db = runner.invoke(
        app, ["--name", "x", "--db", str(path), "--server", "http://127.0.0.1:1"]
    )
    assert server_and_db.exit_code == 2
    none = runner.invoke(app, ["--name", "nothing-ran", "--db", str(path)])
    assert none.exit_code == 0 and "no ended run yet" in none.output
