"""POST /v1/imports' storing step: each run owned by the caller's team, its id the team's."""

from __future__ import annotations

import datetime as dt
import io
import tarfile
from pathlib import Path

from analytics.imports.child import parse
from analytics.store.bundle_child import check_in_child
from analytics.store.bundles import export_run
from analytics.store.db import connect
from api.access.caller import Caller, Role
from api.access.ownership import Kind, Visibility, owner_of
from api.rest.routes import imports
from tests.support.regional_run import store_regional_run

GUIDELLM = Path(__file__).parents[4] / "data" / "imports" / "guidellm" / "0.8.1" / "c1"


def test_a_tar_body_is_its_files_and_any_other_body_is_one_file() -> None:
    data = (GUIDELLM / "benchmarks.json").read_bytes()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("c1/benchmarks.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    assert imports._entries(buffer.getvalue(), "x.tar") == [("c1/benchmarks.json", data)]
    assert imports._entries(data, "benchmarks.json") == [("benchmarks.json", data)]


def test_each_teams_import_is_its_own_run_owned_by_it(tmp_path: Path) -> None:
    con = connect(tmp_path / "i.duckdb")
    parsed = parse([("benchmarks.json", (GUIDELLM / "benchmarks.json").read_bytes())])
    red = Caller("tok-red", "red", Role.SUBMITTER)
    blue = Caller("tok-blue", "blue", Role.SUBMITTER)
    (mine,) = imports._store(con, parsed, None, red, Visibility.TEAM)
    (again,) = imports._store(con, parsed, None, red, Visibility.TEAM)
    (theirs,) = imports._store(con, parsed, "sim", blue, None)
    assert mine.added and not again.added and theirs.added
    assert mine.run_id == again.run_id != theirs.run_id
    assert owner_of(con, Kind.RUN, mine.run_id).team == "red"
    teams = dict(
        con.execute("SELECT object_id, team FROM object_owners WHERE kind = 'run'").fetchall()
    )
    assert teams == {mine.run_id: "red", theirs.run_id: "blue"}
    providers = con.execute("SELECT run_id, provider FROM providers ORDER BY provider").fetchall()
    assert providers == sorted(
        [(mine.run_id, "guidellm"), (theirs.run_id, "sim")], key=lambda r: r[1]
    )
    by = con.execute("SELECT imported_by FROM run_imports ORDER BY imported_by").fetchall()
    assert by == [("tok-blue",), ("tok-red",)]
    con.close()


def test_a_bundle_over_rest_joins_no_schedule_of_this_control_plane(tmp_path: Path) -> None:
    """A crafted bundle naming a victim team's schedule in run_origins would join that
    schedule's trend: origins are not imported over REST."""
    source = tmp_path / "s.duckdb"
    store_regional_run(source, "moved")
    con = connect(source)
    con.execute("INSERT INTO run_origins VALUES ('moved', 'sc-victim', 'sch-victim')")
    export_run(con, "moved", tmp_path / "moved.tbz", dt.datetime.now(dt.UTC))
    con.close()
    bundle = check_in_child((tmp_path / "moved.tbz").read_bytes(), 1 << 30)
    assert bundle.tables["run_origins"].num_rows == 1
    target = connect(tmp_path / "t.duckdb")
    stored = imports._store_bundle(target, bundle, Caller("tok-a", "amber", Role.SUBMITTER), None)
    assert stored.run_id == "moved" and stored.added
    assert target.execute("SELECT count(*) FROM run_origins").fetchone() == (0,)
    assert owner_of(target, Kind.RUN, "moved").team == "amber"
    target.close()
