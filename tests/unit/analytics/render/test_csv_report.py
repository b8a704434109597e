"""The report as CSV: the registry's csv columns, one line per row, raw values."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from analytics.render.csv_report import render_csv
from analytics.report.build import build_report
from analytics.report.columns import columns
from analytics.store.db import connect
from tests.support.builders import MS, S, failed_result, ok_result
from tests.support.builders import REPORT_SCENARIO as SCENARIO
from tests.support.builders import store_run as store
from workers.client.errors import ErrorClass


def test_csv_holds_each_rows_raw_values(tmp_path: Path) -> None:
    con = connect(tmp_path / "csv.duckdb")
    shards = {
        ("api", 0): [ok_result(10 * S + i * 100 * MS, 90.0 + i, [5.0] * 9) for i in range(30)]
        + [failed_result(10 * S, ErrorClass.HTTP_429), failed_result(11 * S, ErrorClass.TIMEOUT)],
        ("gpu", 0): [ok_result(10 * S + i * 100 * MS, 120.0, [6.0] * 9) for i in range(30)],
    }
    store(con, "run", SCENARIO, shards)
    report = build_report(con, "run")
    lines = list(csv.reader(io.StringIO(render_csv(report))))
    header, rows = lines[0], lines[1:]
    assert header == [f for c in columns("csv") for f in c.fields]
    assert len(rows) == len(report.stages) == 2
    for line, row in zip(rows, report.stages, strict=True):
        for field, cell in zip(header, line, strict=True):
            value = row[field]
            if value is None:
                assert cell == "", field
            elif isinstance(value, list):
                assert cell == ";".join(value), field
            elif isinstance(value, float):
                assert float(cell) == value, field  # full precision, not the table's rounding
            else:
                assert cell == str(value), field
    api = dict(zip(header, rows[0], strict=True))
    assert (api["errors"], api["errors_by_class"]) == ("2", "http_429=1, timeout=1")
    assert api["cost_per_mtok_output"] == "1.2" and api["ttft_p99_ms"] != ""
