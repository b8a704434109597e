"""Views and macros are code: created from sql/ on connect, persistent, formulas once."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import duckdb
import pytest

from analytics.query.safe_sql import open_locked
from analytics.query.snapshot import SqlSnapshot
from analytics.store.db import connect, is_current
from analytics.store.views import code_sha256, definitions, stored_sha256

SQL = resources.files("analytics").joinpath("sql")


def shipped_sql() -> dict[str, str]:
    """Every .sql file of the package by its path under sql/."""
    files = {f"views/{f.name}": f for f in SQL.joinpath("views").iterdir()}
    files |= {f.name: f for f in SQL.iterdir() if f.name.endswith(".sql")}
    return {name: f.read_text("utf-8") for name, f in files.items() if name.endswith(".sql")}


def test_each_view_file_creates_the_view_it_is_named_after(tmp_path: Path) -> None:
    con = connect(tmp_path / "v.duckdb")
    names = [name for name, _ in definitions()]
    assert names[0] == "macros.sql" and names[1:] == sorted(names[1:])
    views = {row[0] for row in con.execute("SELECT view_name FROM duckdb_views()").fetchall()}
    for name, sql in definitions()[1:]:
        view = re.sub(r"^views/\d+_(\w+)\.sql$", r"\1", name)
        assert f"CREATE OR REPLACE VIEW {view} AS" in sql and view in views
        con.execute(f"SELECT * FROM {view} LIMIT 0")
    assert stored_sha256(con) == code_sha256()


def test_the_rest_copy_holds_the_views_and_macros(tmp_path: Path) -> None:
    writer = connect(tmp_path / "w.duckdb")
    copy = SqlSnapshot.of(writer).refresh(writer).path
    with open_locked(copy) as con:
        assert is_current(con)
        assert con.execute("SELECT slo_attainment_pct(true, 3, 4)").fetchone() == (75.0,)
        assert con.execute("SELECT count(*) FROM stage_summary").fetchone() == (0,)


@pytest.mark.parametrize(
    "formula",
    [
        ">= 2 * concurrency + 1",  # the steady window
        "THEN last_send_us ELSE last_end_us",
        "BETWEEN w_start_us AND w_end_us",
        "coalesce(tpot_ms <= slo_tpot_ms, true)",  # the SLO check
        "100.0 * met_slo / requests",  # attainment
        "THEN 'api'",  # cost
        "gpu_hour_usd * gpus",
        "* 1e6 / nullif(window_us, 0)",
    ],
)
def test_each_formula_is_written_once_in_the_macros(formula: str) -> None:
    where = [name for name, sql in shipped_sql().items() if formula in sql]
    assert where == ["macros.sql"]


def test_the_formulas_are_the_documented_ones() -> None:
    con = duckdb.connect()
    con.execute(SQL.joinpath("macros.sql").read_text("utf-8"))
    # n >= 2c + 1 requests over a positive span, else the whole span (docs/analytics.md).
    steady = "SELECT steady_window(9, 4, 0, 10), steady_window(8, 4, 0, 10)"
    assert con.execute(steady).fetchone() == (True, False)
    assert con.execute("SELECT steady_window_end_us(8, 4, 0, 10, 15)").fetchone() == (15,)
    # Open loop is judged from intent; a one-token answer cannot miss a TPOT objective.
    met = "SELECT slo_met('ok', ?, 100, 200, NULL, 300, 400, 150, 20, NULL)"
    assert con.execute(met, ["closed"]).fetchone() == (True,)
    assert con.execute(met, ["open"]).fetchone() == (False,)
    # Pricing wins; a deployment of 2 GPUs at $2/h serving 1,000 output tok/s.
    cost = "SELECT cost_basis(?, 2.0, 2), cost_per_mtok(?, 1.2, 2.0, 2, 1000.0)"
    assert con.execute(cost, [0.8, 0.8]).fetchone() == ("api", 1.2)
    assert con.execute(cost, [None, None]).fetchone() == ("gpu_hour", pytest.approx(4 / 3.6))
