"""Ingest is idempotent per (run, shard, attempt, batch) and mirrors the Arrow schema."""

from __future__ import annotations

from pathlib import Path

import duckdb

from analytics.store.db import SCHEMA_VERSION, connect, migrate, schema_version
from analytics.store.ingest import BatchMessage, ingest_batches, join_pool, prepare_records
from scenarios.loader import parse_scenario
from scenarios.wire.records import REQUEST_RECORD_SCHEMA, batch_to_ipc, records_to_batch
from tests.support.builders import ROW_CONTEXT, VALID_SCENARIO, timed_result
from workers.prompts.plan import PlannedRequest
from workers.shard.rows import record_row

# A file written by schema v1 (its tables and views as they shipped).
SCHEMA_V1_AS_SHIPPED = (
    next(p for p in Path(__file__).parents if p.name == "tests")
    / "data"
    / "schema_v1_as_shipped.sql"
)


def message(batch_seq: int, attempt: int = 1, n: int = 3) -> BatchMessage:
    rows = [
        record_row(
            ROW_CONTEXT, PlannedRequest(batch_seq * 10 + i, 1, 2, "p"), timed_result(i, 50, [5])
        )
        for i in range(n)
    ]
    return BatchMessage(
        "run", "s0.a.local", attempt, batch_seq, batch_to_ipc(records_to_batch(rows))
    )


def test_redelivered_batches_are_stored_once(tmp_path: Path) -> None:
    con = connect(tmp_path / "i.duckdb")
    first = ingest_batches(con, [message(0), message(1), message(0)])
    assert (first.batches, first.rows, first.duplicates) == (2, 6, 1)
    again = ingest_batches(con, [message(1), message(2)])
    assert (again.batches, again.rows, again.duplicates) == (1, 3, 1)
    other_attempt = ingest_batches(con, [message(0, attempt=2)])
    assert other_attempt.per_attempt == {("s0.a.local", 2): 1}
    assert con.execute("SELECT count(*) FROM request_records").fetchone() == (12,)


def test_records_joined_ahead_are_appended_unless_a_batch_is_known(tmp_path: Path) -> None:
    con = connect(tmp_path / "p.duckdb")
    batches = [message(0, n=2), message(1, n=3)]
    prepared = prepare_records([m.ipc for m in batches])
    assert prepared is not None
    assert (prepared.table.num_rows, prepared.rows) == (5, [2, 3])
    assert prepared.table.schema.equals(REQUEST_RECORD_SCHEMA)
    assert all(c.num_chunks == 1 for c in prepared.table.columns)  # one chunk per column
    first = ingest_batches(con, batches, prepared=prepared)
    assert (first.batches, first.rows, first.duplicates) == (2, 5, 0)
    # Joined ahead with a batch that is stored by then: only the new one is appended.
    later = [message(1, n=3), message(2, n=4)]
    again = ingest_batches(con, later, prepared=prepare_records([m.ipc for m in later]))
    assert (again.batches, again.rows, again.duplicates) == (1, 4, 1)
    assert con.execute("SELECT count(*) FROM request_records").fetchone() == (9,)
    assert con.execute(
        "SELECT batch_seq, rows FROM ingested_batches ORDER BY batch_seq"
    ).fetchall() == [(0, 2), (1, 3), (2, 4)]
    assert prepare_records([]) is None
    assert join_pool() is join_pool()  # one pool, made once


def test_table_columns_mirror_the_arrow_schema(tmp_path: Path) -> None:
    con = connect(tmp_path / "s.duckdb")
    columns = [r[0] for r in con.execute("DESCRIBE request_records").fetchall()]
    assert columns == REQUEST_RECORD_SCHEMA.names


def test_migration_is_idempotent(tmp_path: Path) -> None:
    con = connect(tmp_path / "v.duckdb")
    assert migrate(con) == schema_version(con) == SCHEMA_VERSION == 21


def test_v1_database_gets_its_run_dimensions_back_filled(tmp_path: Path) -> None:
    con = duckdb.connect(str(tmp_path / "old.duckdb"))
    con.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    con.execute(SCHEMA_V1_AS_SHIPPED.read_text())
    con.execute("INSERT INTO schema_version VALUES (1)")
    scenario = parse_scenario(VALID_SCENARIO)
    con.execute(
        "INSERT INTO runs VALUES ('old', 'n', ?, now(), NULL, 'finished')",
        [scenario.model_dump_json()],
    )
    assert migrate(con) == SCHEMA_VERSION
    names = [r[0] for r in con.execute("SELECT provider FROM providers ORDER BY 1").fetchall()]
    assert names == sorted(p.name for p in scenario.providers)
    assert con.execute("SELECT count(*) FROM slos").fetchone() == (1,)
