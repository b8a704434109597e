"""`tokenbench report --format json --requests` on a real DuckDB file: every request's row,
on stdout or in a file written whole; the real command, in a process of its own."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from analytics.report.build import build_report
from analytics.store.db import connect
from api.cli.report_requests import write_report_with_rows
from tests.conftest import CliResult
from tests.support.builders import MS, REPORT_SCENARIO, S, failed_result, ok_result, store_run
from workers.client.errors import ErrorClass

REQUESTS = 3000  # more than one Arrow batch


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("req") / "runs.duckdb"
    con = connect(path)
    results = [ok_result(10 * S + i * 5 * MS, 50.0, [1.0]) for i in range(REQUESTS - 1)]
    results.append(failed_result(10 * S, ErrorClass.CONNECT, "ConnectError: refused"))
    store_run(con, "run", REPORT_SCENARIO, {("api", 0): results})
    con.close()
    return path


def test_stdout_holds_the_report_and_every_row(
    db: Path, tokenbench_in_process: Callable[..., CliResult]
) -> None:
    done = tokenbench_in_process("report", "run", "--db", str(db), "--format", "json", "--requests")
    assert done.code == 0, done.stderr
    document = json.loads(done.stdout)
    rows = document.pop("requests")
    assert len(rows) == REQUESTS and [r["seq"] for r in rows] == list(range(REQUESTS))
    assert (document.pop("requests_total"), document.pop("requests_truncated")) == (
        REQUESTS,
        False,
    )
    plain = tokenbench_in_process("report", "run", "--db", str(db), "--format", "json")
    assert document == json.loads(plain.stdout)  # the report itself is unchanged
    refused = tokenbench_in_process(
        "report", "run", "--db", str(db), "--format", "csv", "--requests"
    )
    assert refused.code == 2 and "--requests needs --format json" in refused.stderr


def test_a_file_is_written_whole(db: Path, tmp_path: Path) -> None:
    with connect(db, read_only=True) as con:
        report = build_report(con, "run")
    target = tmp_path / "r.json"
    assert write_report_with_rows(report, target, db=db) == REQUESTS
    rows = json.loads(target.read_text())["requests"]
    assert rows[-1]["error_message"] == "ConnectError: refused"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no partial file left
