"""The report's document formats (analytics/render/report_formats.py): every format of the
table renders a stored report, under its media type, the JSON round-tripping."""

from __future__ import annotations

import json
from pathlib import Path

from analytics.render.report_formats import REPORT_FORMATS, render_json
from analytics.report.build import build_report
from analytics.store.db import connect
from tests.support.builders import REPORT_SCENARIO, ok_result, store_run


def _report(tmp_path: Path):  # type: ignore[no-untyped-def]
    con = connect(tmp_path / "f.duckdb")
    results = [ok_result(10_000_000_000 + i * 1_000_000_000, 40.0, [2.0] * 9) for i in range(5)]
    store_run(con, "r1", REPORT_SCENARIO, {("a", 0): results})
    report = build_report(con, "r1")
    con.close()
    return report


def test_json_is_the_default_and_round_trips(tmp_path: Path) -> None:
    report = _report(tmp_path)
    assert next(iter(REPORT_FORMATS)) == "json"
    data = json.loads(render_json(report))
    assert data["run_id"] == "r1"
    assert [row["requests"] for row in data["stages"]] == [5]


def test_every_format_renders_with_its_media_type(tmp_path: Path) -> None:
    report = _report(tmp_path)
    media = {name: fmt.media_type for name, fmt in REPORT_FORMATS.items()}
    assert media == {"json": "application/json", "markdown": "text/markdown",
                     "html": "text/html", "csv": "text/csv"}  # fmt: skip
    for fmt in REPORT_FORMATS.values():
        text = fmt.render(report)
        assert ("r1" in text) or fmt.name == "csv", fmt.name  # CSV: the summary rows only
    assert REPORT_FORMATS["csv"].render(report).splitlines()[1].startswith("a,")
    assert REPORT_FORMATS["html"].render(report).lstrip().lower().startswith("<!doctype html")
