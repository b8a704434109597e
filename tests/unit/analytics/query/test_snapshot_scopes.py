"""One database copy per scope: a team's copy holds only the rows it may read."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import pytest

from analytics.query.safe_sql import SqlError, run_query
from analytics.query.snapshot import ADMIN_SCOPE, SqlScope, SqlSnapshots, classify
from analytics.shadow.capture import ensure_shadow_schema
from analytics.store.db import connect
from api.access.caller import Caller, Role
from api.access.ownership import Kind, Visibility, record_owner, visible_sql
from api.rest.scenario_store import ScenarioStore
from api.schedules.store import ScheduleStore

RED = Caller("tok-red000000000", "red", Role.SUBMITTER)
BLUE = Caller("tok-blue00000000", "blue", Role.VIEWER)
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _scope(caller: Caller) -> SqlScope:
    return SqlScope.of_team(caller.team, lambda kind, column: visible_sql(kind, caller, column))


def _fresh(path: Path) -> duckdb.DuckDBPyConnection:
    """Every table a control plane creates: the schema, the API's and the shadow ones."""
    con = connect(path)
    ScenarioStore(con)
    ScheduleStore(con)
    ensure_shadow_schema(con)
    return con


def _column(path: Path, query: str) -> list[object]:
    table = run_query(path, query).table
    return table.column(0).to_pylist()


def test_every_table_of_a_fresh_database_is_classified(tmp_path: Path) -> None:
    # Default deny drops an unclassified table from teams' copies; this keeps every
    # table a conscious choice (a new table must be added to NAMED_RULES or carry a key).
    con = _fresh(tmp_path / "w.duckdb")
    tables = con.execute(
        "SELECT table_name, list(column_name) FROM duckdb_columns() "
        "WHERE database_name = current_database() AND table_name IN "
        "(SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()) "
        "GROUP BY table_name"
    ).fetchall()
    assert len(tables) > 30
    unclassified = [name for name, columns in tables if classify(name, columns) is None]
    assert unclassified == []


@pytest.fixture
def writer(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    con = _fresh(tmp_path / "w.duckdb")
    for run_id in ("red-private", "red-open", "blue-run", "old-run"):
        con.execute("INSERT INTO runs VALUES (?, 'n', '{}', now(), NULL, 'finished')", [run_id])
        con.execute("INSERT INTO regions VALUES (?, 'eu')", [run_id])
    con.execute(
        "INSERT INTO teams VALUES ('red', 'team', NULL, NULL, NULL, NULL, NULL, ?, ?)", [NOW, NOW]
    )
    record_owner(con, Kind.RUN, "red-private", RED)
    record_owner(con, Kind.RUN, "red-open", RED, Visibility.ORG)
    record_owner(con, Kind.RUN, "blue-run", BLUE)
    for team, run_id in (("red", "red-private"), ("blue", "blue-run")):
        con.execute(
            "INSERT INTO spend_ledger VALUES (?, 'p', current_date, ?, 1, 1, 1.0, now())",
            [team, run_id],
        )
    con.execute(
        "INSERT INTO api_tokens (token_id, token_sha256, team, role, created_at) "
        "VALUES ('tok-x', 'abc', 'red', 'admin', now())"
    )
    con.execute(
        "INSERT INTO audit_log (happened_at, action, outcome) VALUES (now(), 'sql.query', 'ok')"
    )
    con.execute("INSERT INTO api_scenarios VALUES ('sc-red', 'n', '{}', now())")
    record_owner(con, Kind.SCENARIO, "sc-red", RED)
    return con


def test_a_team_copy_holds_only_the_rows_the_team_may_read(
    writer: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    copies = SqlSnapshots.of(writer)
    blue = copies.ensure(writer, _scope(BLUE), max_age_s=0).path
    red = copies.ensure(writer, _scope(RED), max_age_s=0).path
    admin = copies.ensure(writer, ADMIN_SCOPE, max_age_s=0).path
    assert len({blue, red, admin}) == 3
    everything = ["blue-run", "old-run", "red-open", "red-private"]
    assert _column(admin, "SELECT run_id FROM runs ORDER BY 1") == everything
    assert _column(red, "SELECT run_id FROM runs ORDER BY 1") == everything
    # Blue: not red's private run, in tables, views, summaries or the catalog.
    assert _column(blue, "SELECT run_id FROM runs ORDER BY 1") == [
        "blue-run",
        "old-run",
        "red-open",
    ]
    assert _column(blue, "SELECT run_id FROM regions ORDER BY 1") == [
        "blue-run", "old-run", "red-open",
    ]  # fmt: skip
    assert _column(blue, "SELECT count(*) FROM api_scenarios") == [0]
    assert _column(blue, "SELECT team FROM spend_ledger") == ["blue"]
    assert _column(red, "SELECT team FROM spend_ledger") == ["red"]
    tables = _column(blue, "SELECT table_name FROM duckdb_tables() ORDER BY 1")
    for admin_only in ("api_tokens", "audit_log", "teams", "object_owners", "dataset_users"):
        assert admin_only not in tables
    assert _column(blue, "SELECT count(*) FROM duckdb_sequences()") == [0]
    assert "api_tokens" in _column(admin, "SELECT table_name FROM duckdb_tables()")
    with pytest.raises(SqlError):
        run_query(blue, "SELECT * FROM api_tokens")
    # The views read the scoped tables.
    assert _column(blue, "SELECT count(*) FROM requests") == [0]
    # Nothing of the private run in the copy's file at all (never written to it).
    assert b"red-private" not in blue.read_bytes()


def test_copies_are_bounded_and_rebuilt_when_a_team_changes_visibility(
    writer: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    copies = SqlSnapshots.of(writer, max_scopes=2)
    blue = copies.ensure(writer, _scope(BLUE), max_age_s=3600)
    copies.ensure(writer, _scope(RED), max_age_s=3600)
    copies.ensure(writer, ADMIN_SCOPE, max_age_s=3600)
    assert not blue.path.exists()  # the least recently used scope's copy is removed
    assert len(copies.paths()) == 2
    blue = copies.ensure(writer, _scope(BLUE), max_age_s=3600)
    assert "red-private" not in _column(blue.path, "SELECT run_id FROM runs")
    writer.execute("UPDATE teams SET visibility = 'org' WHERE team = 'red'")
    # Young, but made under other rules: made again.
    again = copies.ensure(writer, _scope(BLUE), max_age_s=3600)
    assert again.taken_at > blue.taken_at
    assert "red-private" in _column(again.path, "SELECT run_id FROM runs")
