"""api/rest/routes/answers.py: the capacity answers and sweeps of the runs a caller may
read, from a real DuckDB file; another team's private run is left out in the query."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from analytics.store.db import connect
from api.access.caller import Caller, Role
from api.access.ownership import Kind, Visibility, record_owner
from api.rest.routes.answers import capacity_answers, sweeps


def test_answers_list_only_runs_the_caller_may_read(tmp_path: Path) -> None:
    con = connect(tmp_path / "answers.duckdb")
    now = dt.datetime.now(dt.UTC)
    red = Caller("tok-red", "red", Role.VIEWER)
    blue = Caller("tok-blue", "blue", Role.SUBMITTER)
    for run_id, owner, visibility in (
        ("open", blue, Visibility.ORG),
        ("hidden", blue, Visibility.TEAM),
    ):
        con.execute(
            "INSERT INTO runs VALUES (?, ?, '{}', ?, ?, 'finished')",
            [run_id, f"s-{run_id}", now, now],
        )
        record_owner(con, Kind.RUN, run_id, owner, visibility)
        con.execute(
            "INSERT INTO capacity_results VALUES (?, 'api', 'rate', 'converged', 4.0, 5.0, 1, 2, "
            "3, 'between 4 and 5 req/s', ?)",
            [run_id, now],
        )
        for stage, level in enumerate((1.0, 2.0, 4.0)):
            con.execute(
                "INSERT INTO adaptive_stages VALUES (?, ?, 'api', 'sweep', 'open', ?, NULL, ?)",
                [run_id, stage, level, now],
            )
    seen = capacity_answers(con, red, 10)
    assert [(a["run_id"], a["low"], a["high"], a["message"]) for a in seen] == [
        ("open", 4.0, 5.0, "between 4 and 5 req/s")
    ]
    assert [(s["run_id"], s["levels"], s["low"], s["high"]) for s in sweeps(con, red, 10)] == [
        ("open", 3, 1.0, 4.0)
    ]
    assert {a["run_id"] for a in capacity_answers(con, blue, 10)} == {"open", "hidden"}
