"""User SQL is code: each escape is refused with a clear message, by two layers."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analytics.db import connect
from analytics.safe_sql import (
    SqlError,
    SqlLimits,
    SqlRefused,
    SqlTimeout,
    encode,
    open_locked,
    run_query,
)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "results.duckdb"
    con = connect(path)
    con.execute("CREATE TABLE numbers AS SELECT range AS i FROM range(100)")
    con.close()
    return path


def test_select_runs_and_reads_views(db: Path) -> None:
    result = run_query(db, "SELECT sum(i) AS s FROM numbers")
    assert result.table.to_pylist() == [{"s": 4950}] and not result.truncated
    assert run_query(db, "SELECT count(*) AS n FROM requests").table.to_pylist() == [{"n": 0}]


@pytest.mark.parametrize(
    ("sql", "match"),
    [
        ("SELECT * FROM read_csv('/etc/passwd', sep = ':')", "disabled by configuration"),
        ("SELECT * FROM read_text('/etc/passwd')", "disabled by configuration"),
        ("SELECT * FROM 'https://example.com/x.parquet'", "disabled by configuration"),
        ("SELECT * FROM glob('/etc/*')", "disabled by configuration"),
        ("COPY numbers TO '/tmp/tokenbench-leak.csv'", "COPY statements are refused"),
        ("ATTACH '/tmp/other.duckdb' AS other", "ATTACH statements are refused"),
        ("INSTALL httpfs", "statements are refused"),
        ("LOAD httpfs", "LOAD statements are refused"),
        ("SET enable_external_access = true", "SET statements are refused"),
        ("PRAGMA database_list", "PRAGMA statements are refused"),
        ("CALL pragma_version()", "CALL statements are refused"),
        ("CREATE TABLE t (i INTEGER)", "CREATE statements are refused"),
        ("SELECT 1; SELECT 2", "exactly one statement"),
    ],
)
def test_escapes_are_refused(db: Path, sql: str, match: str) -> None:
    with pytest.raises(SqlRefused, match=match):
        run_query(db, sql)
    assert not Path("/tmp/tokenbench-leak.csv").exists()


@pytest.mark.parametrize(
    ("sql", "match"),
    [
        ("COPY numbers TO '/tmp/tokenbench-leak.csv'", "disabled by configuration"),
        ("SELECT * FROM read_csv('/etc/passwd')", "disabled by configuration"),
        ("ATTACH '/tmp/other.duckdb' AS other", "disabled by configuration"),
        ("INSTALL httpfs", "disabled by configuration"),
        ("LOAD httpfs", "disabled through configuration"),
        ("SET enable_external_access = true", "configuration has been locked"),
        ("SET threads = 8", "configuration has been locked"),
        ("RESET max_memory", "configuration has been locked"),
        ("CREATE TABLE t (i INTEGER)", "read-only mode"),
    ],
)
def test_the_connection_refuses_even_without_the_statement_check(
    db: Path, sql: str, match: str
) -> None:
    # Defence in depth: the locked connection holds on its own.
    con = open_locked(db)
    with pytest.raises(duckdb.Error, match=match):
        con.execute(sql)
    assert con.execute("SELECT current_setting('threads')").fetchone() == (1,)
    con.close()


def test_a_query_that_would_run_forever_times_out(db: Path) -> None:
    with pytest.raises(SqlTimeout, match=r"0\.3 s statement timeout"):
        run_query(db, "SELECT count(*) FROM range(1000000000000)", SqlLimits(timeout_s=0.3))


def test_rows_are_capped(db: Path) -> None:
    result = run_query(db, "SELECT * FROM numbers", SqlLimits(max_rows=7))
    assert result.table.num_rows == 7 and result.truncated
    assert not run_query(db, "SELECT * FROM numbers", SqlLimits(max_rows=100)).truncated


def test_syntax_errors_are_plain_messages(db: Path) -> None:
    with pytest.raises(SqlError, match="syntax error"):
        run_query(db, "SELEC 1")


def test_encodings_round_trip(db: Path, tmp_path: Path) -> None:
    table = run_query(db, "SELECT i, 'x' AS s FROM numbers WHERE i < 3").table
    assert encode(table, "csv").decode().splitlines() == ['"i","s"', '0,"x"', '1,"x"', '2,"x"']
    assert json.loads(encode(table, "json"))[2] == {"i": 2, "s": "x"}
    (tmp_path / "t.parquet").write_bytes(encode(table, "parquet"))
    assert pq.read_table(tmp_path / "t.parquet").equals(table)
    assert pa.ipc.open_stream(encode(table, "arrow")).read_all().equals(table)
