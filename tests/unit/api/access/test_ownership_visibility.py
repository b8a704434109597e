"""The read rule as SQL and in Python agree, and follow the service-wide default."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from analytics.store.db import connect
from api.access import ownership
from api.access.caller import Caller, Role
from api.access.ownership import Kind, Visibility, may_read, owner_of, record_owner, visible_sql

RED = Caller("tok-red000000000", "red", Role.SUBMITTER)
BLUE = Caller("tok-blue00000000", "blue", Role.VIEWER)


@pytest.fixture
def con(tmp_path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    con = connect(tmp_path / "o.duckdb")
    for run_id in ("red-run", "red-open", "blue-run"):
        con.execute("INSERT INTO runs VALUES (?, 'n', '{}', now(), NULL, 'finished')", [run_id])
    record_owner(con, Kind.RUN, "red-run", RED)
    record_owner(con, Kind.RUN, "red-open", RED, Visibility.ORG)
    record_owner(con, Kind.RUN, "blue-run", BLUE)
    yield con
    ownership.set_default_visibility(Visibility.ORG)


def _visible(con: duckdb.DuckDBPyConnection, caller: Caller) -> set[str]:
    condition, params = visible_sql(Kind.RUN, caller, "r.run_id")
    query = f"SELECT run_id FROM runs AS r WHERE {condition}"
    return {str(row[0]) for row in con.execute(query, params).fetchall()}


def _readable(con: duckdb.DuckDBPyConnection, caller: Caller) -> set[str]:
    ids = [str(r[0]) for r in con.execute("SELECT run_id FROM runs").fetchall()]
    return {i for i in ids if may_read(con, caller, owner_of(con, Kind.RUN, i))}


@pytest.mark.parametrize("default", [Visibility.ORG, Visibility.TEAM])
def test_sql_and_python_rules_agree_under_the_service_default(
    con: duckdb.DuckDBPyConnection, default: Visibility
) -> None:
    ownership.set_default_visibility(default)
    for caller in (RED, BLUE):
        assert _visible(con, caller) == _readable(con, caller)
    shared = {"red-run", "red-open", "blue-run"}
    assert _visible(con, BLUE) == (
        shared if default is Visibility.ORG else {"red-open", "blue-run"}
    )


def test_a_team_setting_overrides_the_default(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        "INSERT INTO teams (team, visibility, created_at, updated_at) "
        "VALUES ('red', 'team', now(), now())"
    )
    assert _visible(con, BLUE) == {"red-open", "blue-run"} == _readable(con, BLUE)
    assert _visible(con, RED) == {"red-run", "red-open", "blue-run"}
