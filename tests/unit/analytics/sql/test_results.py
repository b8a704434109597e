"""analytics/sql/results.py: one row read without leaving the connection's result open
(DuckDB 2 refuses a registration after an unfinished result: the shadow-capture ingest
failed that way behind a REST read on the writer connection)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from analytics.sql.results import first_row


def test_first_row_leaves_the_connection_free_where_fetchone_does_not() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT range AS n FROM range(3)")
    table = pa.table({"n": [1]})
    con.execute("SELECT n FROM t ORDER BY n").fetchone()
    with pytest.raises(duckdb.Error, match="unfinished result"):
        con.register("incoming", table)
    con.execute("SELECT 1").fetchall()
    assert first_row(con.execute("SELECT n FROM t ORDER BY n")) == (0,)
    con.register("incoming", table)  # free: no error
    assert first_row(con.execute("SELECT n FROM t WHERE n > 5")) is None


def test_no_source_module_leaves_a_result_open_with_fetchone() -> None:
    # The control plane's writer connection is shared by the loop and the REST routes: a
    # fetchone() anywhere in the source can leave it blocked for the loop's next ingest.
    repo = Path(__file__).resolve().parents[4]
    offenders = [
        f"{path.relative_to(repo)}:{n}"
        for package in ("analytics", "api", "scenarios", "workers")
        for path in sorted((repo / package).rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if ".fetchone()" in line
    ]
    assert offenders == [], "use analytics.sql.results.first_row: " + ", ".join(offenders)
