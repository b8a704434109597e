"""The database copy user SQL reads while a writer holds the file."""

from __future__ import annotations

from pathlib import Path

from analytics.query.safe_sql import run_query
from analytics.query.snapshot import SqlSnapshot
from analytics.store.db import connect
from api.schedules.store import ScheduleStore


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


def test_the_copy_holds_webhook_urls_in_their_public_form_only(tmp_path: Path) -> None:
    writer = connect(tmp_path / "w.duckdb")
    store = ScheduleStore(writer)
    secret = "https://hook:pa55word@hooks.example/T1/s3cret?token=tk9"
    for name, url in (("a", secret), ("b", None), ("c", "https://plain.example")):
        store.add(
            name=name, scenario_id="s", cron="0 * * * *", timezone="UTC", overrides=None,
            wait_for_workers=False, webhook_url=url, trend_window=5, min_change=0.1,
        )  # fmt: skip
    info = SqlSnapshot.of(writer).ensure(writer, max_age_s=0)
    shown = run_query(info.path, "SELECT name, webhook_url FROM schedules ORDER BY name")
    assert shown.table.to_pylist() == [
        {"name": "a", "webhook_url": "https://[redacted]@hooks.example/[redacted]"},
        {"name": "b", "webhook_url": None},
        {"name": "c", "webhook_url": "https://plain.example/"},
    ]
    # Not in the copy's bytes at all, while the writer keeps the URL for delivery.
    data = info.path.read_bytes()
    assert b"pa55word" not in data and b"s3cret" not in data and b"tk9" not in data
    assert [s.webhook_url for s in store.live() if s.name == "a"] == [secret]
