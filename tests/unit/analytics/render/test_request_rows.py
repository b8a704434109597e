"""The JSON report with each request's row, on a real DuckDB file: every row when uncapped,
and caps in rows and bytes that say what they left out."""

from __future__ import annotations

import json

import duckdb
import pytest

from analytics.render.report_formats import render_json
from analytics.render.request_rows import BATCH_ROWS, request_batches, write_report_with_requests
from analytics.report.build import build_report
from analytics.store.db import connect
from tests.support.builders import MS, REPORT_SCENARIO, S, failed_result, ok_result, store_run
from workers.client.errors import ErrorClass

OK = BATCH_ROWS + 500  # more than one batch


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> duckdb.DuckDBPyConnection:
    con = connect(tmp_path_factory.mktemp("rows") / "r.duckdb")
    results = [ok_result(10 * S + i * 10 * MS, 100.0, [2.0] * 3) for i in range(OK)]
    results += [failed_result(10 * S, ErrorClass.HTTP_429, "HTTP 429: slow")]
    store_run(con, "run", REPORT_SCENARIO, {("api", 0): results[: OK // 2], ("gpu", 1): results})
    return con


def _document(
    con: duckdb.DuckDBPyConnection, **caps: int
) -> tuple[dict[str, object], list[dict[str, object]]]:
    parts: list[str] = []
    report = build_report(con, "run")
    written = write_report_with_requests(
        report, request_batches(con, "run"), parts.append, cut_note="see elsewhere", **caps
    )
    document = json.loads("".join(parts))
    rows = document.pop("requests")
    assert written.rows == len(rows)
    return document, rows


def test_every_row_follows_the_report(run: duckdb.DuckDBPyConnection) -> None:
    document, rows = _document(run)
    total = OK // 2 + OK + 1
    assert (document.pop("requests_total"), document.pop("requests_truncated")) == (total, False)
    assert document == json.loads(render_json(build_report(run, "run")))
    assert len(rows) == total
    sql = "SELECT count(*) FROM requests WHERE run_id = 'run'"
    assert run.execute(sql).fetchone() == (total,)
    assert [(r["stage"], r["seq"]) for r in rows[:2]] == [(0, 0), (0, 1)]  # record order
    failed = [r for r in rows if r["status"] == "error"]
    assert [(r["error_class"], r["error_message"], r["ttft_ms"]) for r in failed] == [
        ("http_429", "HTTP 429: slow", None)
    ]
    assert rows[0]["ttft_ms"] == pytest.approx(100.0) and rows[0]["itl_ns"] == [2 * MS] * 3
    assert "run_id" not in rows[0]


def test_caps_leave_rows_out_and_say_so(run: duckdb.DuckDBPyConnection) -> None:
    document, rows = _document(run, max_rows=10)
    assert len(rows) == 10 and document["requests_truncated"] is True
    total = document["requests_total"]
    assert document["requests_note"] == f"the first 10 of {total:,} requests. see elsewhere"
    one_row = len(json.dumps(rows[0]).encode())
    small, rows = _document(run, max_bytes=5 * one_row)
    assert 1 <= len(rows) <= 5 and small["requests_truncated"] is True
    enough, rows = _document(run, max_rows=10 * OK)
    assert enough["requests_truncated"] is False and len(rows) == total
