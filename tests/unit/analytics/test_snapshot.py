"""The database copy user SQL reads while a writer holds the file."""

from __future__ import annotations

from pathlib import Path

from analytics.db import connect
from analytics.safe_sql import run_query
from analytics.snapshot import SqlSnapshot


def _runs(path: Path) -> list[object]:
    return run_query(path, "SELECT run_id FROM runs ORDER BY 1").table.column("run_id").to_pylist()


def test_copy_is_readable_while_the_writer_holds_the_file_and_refreshes_when_stale(
    tmp_path: Path,
) -> None:
    writer = connect(tmp_path / "w.duckdb")
    writer.execute("INSERT INTO runs VALUES ('a', 'n', '{}', now(), NULL, 'finished')")
    snapshot = SqlSnapshot.of(writer)
    first = snapshot.ensure(writer, max_age_s=60)
    assert first.path == tmp_path / "w.duckdb.sql-snapshot.duckdb"
    assert _runs(first.path) == ["a"]
    writer.execute("INSERT INTO runs VALUES ('b', 'n', '{}', now(), NULL, 'finished')")
    # Young enough: the same copy, without the new row (that is its staleness).
    again = snapshot.ensure(writer, max_age_s=60)
    assert again.taken_at == first.taken_at and _runs(again.path) == ["a"]
    fresh = snapshot.ensure(writer, max_age_s=0)
    assert fresh.taken_at > first.taken_at and _runs(fresh.path) == ["a", "b"]
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
