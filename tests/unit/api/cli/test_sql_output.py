"""`tokenbench sql` exports every row or fails naming the cap; the table says what it cut.
A real DuckDB file with more rows than the table's default cap, and the real command."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analytics.query.safe_sql import QueryResult
from analytics.store.db import connect
from api.cli.sql_output import TABLE_ROWS, table_caption
from tests.conftest import CliResult

ROWS = 2 * TABLE_ROWS + 5_000  # more than the table shows, several Arrow batches
QUERY = f"SELECT range AS i, 'row ' || range AS label FROM range({ROWS}) ORDER BY i"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sql") / "results.duckdb"
    connect(path).close()
    return path


def test_file_exports_hold_every_row(
    db: Path, tmp_path: Path, tokenbench_in_process: Callable[..., CliResult]
) -> None:
    for fmt in ("csv", "json", "parquet"):
        target = tmp_path / f"all.{fmt}"
        done = tokenbench_in_process(
            "sql", QUERY, "--db", str(db), "--format", fmt, "-o", str(target)
        )
        assert done.code == 0, done.stderr
        assert done.stderr == ""  # nothing cut, nothing to say
        if fmt == "parquet":
            assert pq.read_table(target).column("i").to_pylist() == list(range(ROWS))
        elif fmt == "json":
            rows = json.loads(target.read_text())
            assert len(rows) == ROWS and rows[-1] == {"i": ROWS - 1, "label": f"row {ROWS - 1}"}
        else:
            lines = list(csv.reader(io.StringIO(target.read_text())))
            assert lines[0] == ["i", "label"] and len(lines) == ROWS + 1


def test_stdout_exports_stream_every_row(
    db: Path, tokenbench_in_process: Callable[..., CliResult]
) -> None:
    done = tokenbench_in_process("sql", QUERY, "--db", str(db), "--format", "json")
    assert done.code == 0, done.stderr
    assert [row["i"] for row in json.loads(done.stdout)] == list(range(ROWS))


def test_an_export_past_max_rows_fails_and_leaves_nothing(
    db: Path, tmp_path: Path, tokenbench_in_process: Callable[..., CliResult]
) -> None:
    target = tmp_path / "capped.parquet"
    target.write_bytes(b"an earlier export")
    done = tokenbench_in_process(
        "sql", QUERY, "--db", str(db), "--format", "parquet", "-o", str(target),
        "--max-rows", "1000",
    )  # fmt: skip
    assert done.code == 2
    assert done.stderr.strip() == (
        f"the answer has more than 1,000 rows (--max-rows 1000): nothing was written to "
        f"{target}; raise --max-rows, or leave it out to export every row"
    )
    assert target.read_bytes() == b"an earlier export"  # neither cut nor clobbered
    assert sorted(p.name for p in tmp_path.iterdir()) == ["capped.parquet"]
    on_stdout = tokenbench_in_process(
        "sql", QUERY, "--db", str(db), "--format", "csv", "--max-rows", "10"
    )
    assert on_stdout.code == 2 and "stdout stops short" in on_stdout.stderr
    # Within the cap, the cap changes nothing.
    enough = tokenbench_in_process(
        "sql", QUERY, "--db", str(db), "--format", "csv", "--max-rows", str(ROWS)
    )
    assert enough.code == 0 and len(enough.stdout.splitlines()) == ROWS + 1


def test_the_table_says_how_many_rows_it_cut(
    db: Path, tokenbench_in_process: Callable[..., CliResult]
) -> None:
    done = tokenbench_in_process("sql", QUERY, "--db", str(db))
    assert done.code == 0, done.stderr
    assert f"{TABLE_ROWS:,} of {ROWS:,} rows shown; {ROWS - TABLE_ROWS:,} cut at --max-rows" in (
        done.stdout
    )
    small = tokenbench_in_process("sql", "SELECT 1 AS one", "--db", str(db))
    assert "1 rows · " in small.stdout and "cut" not in small.stdout


def test_caption_of_an_answer_whose_rest_was_not_counted() -> None:
    table = pa.table({"i": [1, 2]})
    remote = QueryResult(table, truncated=True, elapsed_s=0.25)
    assert table_caption(remote, 2) == "2 rows shown; more cut at --max-rows 2 · 0.250 s"
    whole = QueryResult(table, truncated=False, elapsed_s=0.25, total_rows=2)
    assert table_caption(whole, 10) == "2 rows · 0.250 s"
