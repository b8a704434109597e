"""A report names the runs that overlapped its shared endpoints only when the caller may
read them (api/rest/routes/runs.py): another team's private run is said, not named."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from analytics.report.build import build_report
from analytics.store.db import connect
from api.access.caller import Caller, Role
from api.access.ownership import Kind, Visibility, record_owner
from api.rest.routes.runs import OTHER_TEAMS_RUN, _hide_unreadable
from tests.support.builders import REPORT_SCENARIO, ok_result, store_run


def test_an_unreadable_overlapping_run_is_not_named(tmp_path: Path) -> None:
    con = connect(tmp_path / "overlaps.duckdb")
    results = [ok_result(0, 10.0, [1.0] * 9)]
    store_run(con, "mine", REPORT_SCENARIO, {("api", 0): results})
    red = Caller("tok-red", "red", Role.VIEWER)
    blue = Caller("tok-blue", "blue", Role.SUBMITTER)
    record_owner(con, Kind.RUN, "mine", red)
    record_owner(con, Kind.RUN, "blue-private", blue, Visibility.TEAM)
    record_owner(con, Kind.RUN, "blue-open", blue, Visibility.ORG)
    row = {"provider": "api", "target": "t", "other_provider": "x", "overlap_s": 1.0}
    overlaps = [{**row, "run_id": "blue-private"}, {**row, "run_id": "blue-open"}]
    report = dataclasses.replace(build_report(con, "mine"), shared_overlaps=overlaps)
    seen_by_red = _hide_unreadable(con, report, red).shared_overlaps
    assert [r["run_id"] for r in seen_by_red] == [OTHER_TEAMS_RUN, "blue-open"]
    assert all(r["overlap_s"] == 1.0 for r in seen_by_red)  # the overlap itself is said
    seen_by_blue = _hide_unreadable(con, report, blue).shared_overlaps
    assert [r["run_id"] for r in seen_by_blue] == ["blue-private", "blue-open"]
