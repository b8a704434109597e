"""Where a run's report goes and what the exit code says (api/cli/output.py), on a real
DuckDB file with stored records."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
import typer

from analytics.report.build import RunReport, build_report
from analytics.store.db import connect
from api.cli.console import OutputFormat
from api.cli.output import exit_on_verdict, write_report
from scenarios.wire.contract import RunState
from tests.support.builders import REPORT_SCENARIO, failed_result, ok_result, store_run
from workers.client.errors import ErrorClass


@pytest.fixture
def report(tmp_path: Path) -> RunReport:
    """Provider ``a`` measured in stage 0; every request of stage 1 was refused."""
    con: duckdb.DuckDBPyConnection = connect(tmp_path / "o.duckdb")
    ok = [ok_result(10_000_000_000 + i * 1_000_000_000, 50.0, [2.0] * 9) for i in range(4)]
    refused = [failed_result(20_000_000_000 + i, ErrorClass.CONNECT) for i in range(3)]
    store_run(con, "r1", REPORT_SCENARIO, {("a", 0): ok, ("a", 1): refused})
    built = build_report(con, "r1")
    con.close()
    return built


def test_a_stage_that_failed_entirely_exits_1_naming_it(
    report: RunReport, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(typer.Exit) as exit_info:
        exit_on_verdict(RunState.FINISHED, report, 1.0)
    assert exit_info.value.exit_code == 1
    assert "a stage 1 (local): 3 of 3 requests failed (100.0 %)" in capsys.readouterr().err


def test_a_run_that_did_not_finish_exits_1(
    report: RunReport, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(typer.Exit):
        exit_on_verdict(RunState.CANCELLED, report, 1.0)
    assert "ended cancelled" in capsys.readouterr().err


def test_within_the_limit_returns_quietly(report: RunReport) -> None:
    healthy = RunReport(**{**vars(report), "stages": [s for s in report.stages if s["stage"] == 0]})
    exit_on_verdict(RunState.FINISHED, healthy, 1.0)  # no exception: exit 0


def test_the_report_goes_to_the_file_and_the_note_to_stderr(
    report: RunReport, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    write_report(report, OutputFormat.json, out)
    assert json.loads(out.read_text())["run_id"] == "r1"
    streams = capsys.readouterr()
    assert streams.out == ""
    assert f"report written to {out}" in streams.err


def test_an_unwritable_file_is_bad_input(report: RunReport, tmp_path: Path) -> None:
    with pytest.raises(typer.Exit) as exit_info:
        write_report(report, OutputFormat.json, tmp_path / "missing" / "r.json")
    assert exit_info.value.exit_code == 2
