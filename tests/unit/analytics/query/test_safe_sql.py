"""User SQL is code: each escape is refused with a clear message, by two layers."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analytics.query.safe_sql import (
    BATCH_ROWS,
    SqlError,
    SqlLimits,
    SqlRefused,
    SqlTimeout,
    SqlTooManyRows,
    encode,
    encode_capped,
    export_query,
    open_locked,
    public_message,
    run_query,
)
from analytics.store.db import connect


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


def test_rows_past_the_cap_are_counted_when_asked(db: Path) -> None:
    big = "SELECT range AS i FROM range(25000)"
    counted = run_query(db, big, SqlLimits(max_rows=7), count_all=True)
    assert counted.table.column("i").to_pylist() == list(range(7))
    assert counted.truncated and counted.total_rows == 25_000
    assert run_query(db, big, SqlLimits(max_rows=7)).total_rows is None  # not counted
    whole = run_query(db, "SELECT * FROM numbers", SqlLimits(max_rows=100), count_all=True)
    assert not whole.truncated and whole.total_rows == 100


# Several Arrow batches of rows, with a NULL and text that needs quoting.
MANY = (
    "SELECT range AS i, CASE WHEN range % 7 = 0 THEN NULL ELSE 'v,' || range END AS s "
    f"FROM range({5 * BATCH_ROWS + 17}) ORDER BY i"
)


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet", "arrow"])
def test_an_export_writes_every_row_as_encode_would(db: Path, tmp_path: Path, fmt: str) -> None:
    target = tmp_path / f"all.{fmt}"
    with target.open("wb") as sink:
        result = export_query(db, MANY, fmt, sink)
    assert result.rows == 5 * BATCH_ROWS + 17
    whole = run_query(db, MANY, SqlLimits(max_rows=10 * BATCH_ROWS)).table
    # The same bytes as the whole table encoded at once; Parquet's row groups differ, so
    # Parquet is compared as data. The capped encoder of the REST answer writes the same.
    for written in (target.read_bytes(), encode_capped(whole, fmt, 1 << 30)):
        if fmt == "parquet":
            assert pq.read_table(pa.BufferReader(written)).equals(whole)
        else:
            assert written == encode(whole, fmt)


def test_an_export_past_its_row_cap_stops_and_reads_as_cut_short(db: Path, tmp_path: Path) -> None:
    target = tmp_path / "cut.json"
    with target.open("wb") as sink, pytest.raises(SqlTooManyRows, match="more than 3,000 rows"):
        export_query(db, MANY, "json", sink, max_rows=3000)
    with pytest.raises(json.JSONDecodeError):  # no closing bracket: not mistaken for whole
        json.loads(target.read_bytes())
    with (tmp_path / "ok.json").open("wb") as sink:
        assert export_query(db, "SELECT * FROM numbers", "json", sink, max_rows=100).rows == 100


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


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM duckdb_settings()",
        "SELECT value FROM duckdb_settings() WHERE name = 'temp_directory'",
        "SELECT path FROM duckdb_databases()",
        "FROM pragma_database_list",
        "SELECT * FROM duckdb_extensions()",
        "SELECT current_setting('temp_directory')",
        "SELECT CURRENT_SETTING('home_directory')",
        'SELECT * FROM "duckdb_databases"()',
        "SELECT * FROM system.main.duckdb_settings()",
        "SELECT * FROM duckdb_temporary_files()",
        "SELECT * FROM duckdb_secrets()",
        "EXPLAIN SELECT current_setting('secret_directory')",
        "WITH s AS (SELECT * FROM duckdb_settings()) SELECT * FROM s",
        "SELECT * FROM query('SELECT * FROM duckdb_' || 'settings()')",
        "SELECT * FROM query_table('runs')",
    ],
)
def test_functions_showing_server_paths_are_refused_by_name(db: Path, sql: str) -> None:
    with pytest.raises(SqlRefused, match="not available to user SQL"):
        run_query(db, sql)


def test_names_in_strings_comments_and_columns_are_not_refused(db: Path) -> None:
    result = run_query(
        db, "SELECT 'duckdb_settings()' AS query, 1 AS current_setting_x -- current_setting"
    )
    assert result.table.to_pylist() == [{"query": "duckdb_settings()", "current_setting_x": 1}]


def test_the_locked_connection_still_answers_those_functions_so_the_names_are_needed(
    db: Path,
) -> None:
    # Why the name check exists: the configuration lock does not hide them.
    con = open_locked(db)
    try:
        (path,) = con.execute("SELECT path FROM duckdb_databases() WHERE NOT internal").fetchone()
    finally:
        con.close()
    assert str(db) == path


def test_server_paths_in_error_messages_are_replaced(db: Path) -> None:
    with pytest.raises(SqlRefused) as caught:
        run_query(db, "SELECT * FROM read_text('/etc/ssh/sshd_config')")
    assert "/etc/ssh" not in str(caught.value) and "<path>" in str(caught.value)
    assert public_message("Cannot open /root/.duckdb/extensions/x, 4 / 2") == (
        "Cannot open <path>, 4 / 2"
    )


@pytest.mark.parametrize("fmt", ["json", "csv", "parquet"])
def test_an_answer_the_format_cannot_hold_is_a_classified_error(db: Path, fmt: str) -> None:
    table = run_query(db, "SELECT * FROM test_all_types()").table
    for call in (lambda: encode(table, fmt), lambda: encode_capped(table, fmt, 10**8)):
        with pytest.raises(SqlError) as caught:
            call()
        message = str(caught.value)
        assert f"the {fmt} format cannot represent" in message
        assert "Error" not in message and "days=" not in message and "pyarrow" not in message
    assert encode(table, "arrow")  # arrow holds every type
