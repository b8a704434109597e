"""Opening a results file: migrations hold tables, views are code, older files upgrade."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from pydantic import ValidationError

from analytics.query.safe_sql import open_locked, run_query
from analytics.report.build import build_report
from analytics.report.stored import ExactLimits
from analytics.store.db import SCHEMA_VERSION, connect, is_current, load_sql, schema_version
from analytics.store.record_table import request_records_sql
from analytics.store.views import code_sha256, stored_sha256
from scenarios.settings import DuckDBSettings
from scenarios.wire.records import REQUEST_RECORD_SCHEMA
from tests.support.builders import MS, S, failed_result, ok_result
from tests.support.builders import REPORT_SCENARIO as SCENARIO
from tests.support.builders import store_run as store
from workers.client.errors import ErrorClass

SCHEMA_V1_AS_SHIPPED = (
    next(p for p in Path(__file__).parents if p.name == "tests")
    / "data"
    / "schema_v1_as_shipped.sql"
)
# The columns each table had in schema v1 (later versions added and widened some).
V1_COLUMNS = {
    "runs": "run_id, name, scenario, created_at, finished_at, state",
    "shards": "run_id, shard_id, stage, provider, region, concurrency, planned_requests, "
    "state, accepted_attempt, records, message, dispatches",
    "shard_attempts": "run_id, shard_id, attempt, worker, state, started_at, finished_at, "
    "records, batches, message",
    "ingested_batches": "*",
    # v9 added how each planned prompt length was made (docs/lengths.md), v10 tool calls,
    # v11 token truth (prompt_count_source, finish_reason), v12 sessions.
    # v14 the dataset row of each request.
    # v16 images.
    # v17 failover.
    "request_records": ", ".join(
        name
        for name in REQUEST_RECORD_SCHEMA.names
        if name
        not in (
            "planned_prompt_source",
            "prompt_tokens_per_word",
            "prompt_template_tokens",
            "tools_offered",
            "tool_call",
            "tool_call_at_ns",
            "tool_calls",
            "prompt_count_source",
            "finish_reason",
            "session_id",
            "turn",
            "session_turns",
            "context_tokens",
            "session_end",
            "dataset_id",
            "dataset_row",
            "images",
            "image_bytes",
            "image_pixels",
            "image_digest",
            "image_prompt_tokens",
            "client_request_id",
            "prompt_hash",
            # v20 where the time goes.
            "response_id",
            "server_request_id",
            "server_queue_ns",
            "server_ttft_ns",
            "server_timing_source",
            "cached_tokens",
            "cache_write_tokens",
            "planned_cached_tokens",
            "dns_ns",
            "connect_ns",
            "tls_ns",
            "request_written_ns",
            "connection_new",
        )
    ),
}


def current_file(path: Path) -> None:
    """Two providers over two stages, with failures, written by this version."""
    con = connect(path)
    shards = {
        (provider, stage): [
            ok_result(10 * S + i * 100 * MS, 80.0 + 7 * i % 50 + 30 * stage, [4.0 + i % 3] * 9)
            for i in range(40)
        ]
        + [failed_result(10 * S + i * S, ErrorClass.HTTP_429) for i in range(stage * 2)]
        for provider in ("api", "own")
        for stage in (0, 1)
    }
    store(con, "run", SCENARIO, shards)
    con.close()


def v1_file(path: Path, source: Path) -> None:
    """A file as schema v1 wrote it (its tables and views), holding ``source``'s run."""
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    con.execute(SCHEMA_V1_AS_SHIPPED.read_text())
    con.execute("INSERT INTO schema_version VALUES (1)")
    con.execute(f"ATTACH '{source}' AS src (READ_ONLY)")
    for table, columns in V1_COLUMNS.items():
        con.execute(f"INSERT INTO {table} SELECT {columns} FROM src.{table}")
    con.execute("DETACH src")
    con.close()


def report_json(path: Path, **kwargs: object) -> object:
    con = connect(path, read_only=True)
    try:
        report = json.loads(json.dumps(build_report(con, "run", **kwargs).to_dict()))  # type: ignore[arg-type]
    finally:
        con.close()
    for row in report["stages"]:
        # How planned prompt lengths were made is recorded since v9, why answers ended
        # since v11: unknown (None) before.
        row.pop("prompt_length_source", None)
        row.pop("finish_reasons", None)
    return report


def test_a_v1_file_upgrades_in_one_step_and_reports_like_a_new_one(tmp_path: Path) -> None:
    new, old = tmp_path / "new.duckdb", tmp_path / "old.duckdb"
    current_file(new)
    v1_file(old, new)
    with duckdb.connect(str(old), read_only=True) as con:
        assert schema_version(con) == 1 and not is_current(con)
    # Exact percentiles from the records, and the stored aggregates the upgrade back-fills.
    for limits in (ExactLimits(), ExactLimits(ok_requests=0, itl_gaps=0)):
        assert report_json(old, exact_limits=limits) == report_json(new, exact_limits=limits)
    with duckdb.connect(str(old), read_only=True) as con:
        assert schema_version(con) == SCHEMA_VERSION and is_current(con)
        assert con.execute("SELECT count(*) FROM shard_summaries").fetchone() == (4,)


def test_migrations_create_tables_only(tmp_path: Path) -> None:
    con = duckdb.connect(str(tmp_path / "m.duckdb"))
    con.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    for version in range(1, SCHEMA_VERSION + 1):
        if version == 1:
            con.execute(request_records_sql())  # as migrate() does: from the Arrow schema
        con.execute(load_sql(f"schema_v{version}"))
        views = con.execute("SELECT count(*) FROM duckdb_views() WHERE NOT internal").fetchone()
        assert views == (0,), f"schema_v{version}.sql creates a view"
    macros = con.execute("SELECT count(*) FROM duckdb_functions() WHERE NOT internal").fetchone()
    assert macros == (0,)


def test_a_read_only_open_brings_views_of_another_version_up_to_date(tmp_path: Path) -> None:
    path = tmp_path / "r.duckdb"
    current_file(path)
    with duckdb.connect(str(path)) as con:
        # As another version left it: other definitions, another hash.
        con.execute("CREATE OR REPLACE VIEW stage_summary AS SELECT 1 AS other")
        con.execute("UPDATE view_code SET sha256 = 'another version'")
    con = connect(path, read_only=True)
    assert stored_sha256(con) == code_sha256()
    assert "ttft_p99_ms" in [d[0] for d in con.execute("SELECT * FROM stage_summary").description]
    con.close()


def test_a_read_write_open_recreates_the_views_only_when_their_hash_differs(
    tmp_path: Path,
) -> None:
    path = tmp_path / "w.duckdb"
    current_file(path)
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE OR REPLACE VIEW requests AS SELECT 1 AS edited")  # hash unchanged
    con = connect(path)
    # Same code, same hash: the open binds nothing again (docs/analytics.md), so the
    # hand edit stays...
    assert con.execute("SELECT count(*) FROM requests").fetchone() == (1,)
    con.execute("DELETE FROM view_code")  # ...until the hash says otherwise
    con.close()
    con = connect(path)
    assert con.execute("SELECT count(*) FROM requests").fetchone() == (164,)
    con.close()


def test_user_sql_reads_this_versions_views(tmp_path: Path) -> None:
    path = tmp_path / "u.duckdb"
    current_file(path)
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE OR REPLACE VIEW stages AS SELECT 1 AS other")
        con.execute("DROP TABLE view_code")  # as a file from before views were code
    result = run_query(path, "SELECT concurrency, shards FROM stages ORDER BY stage")
    assert result.table.to_pylist() == [{"concurrency": 1, "shards": 2}] * 2
    with open_locked(path) as con:
        assert is_current(con)


def test_user_sql_leaves_a_file_that_is_not_tokenbench_s_alone(tmp_path: Path) -> None:
    path = tmp_path / "other.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t AS SELECT 1 AS x")
    assert run_query(path, "SELECT x FROM t").table.to_pylist() == [{"x": 1}]
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SELECT table_name FROM duckdb_tables()").fetchall() == [("t",)]


def test_a_newer_schema_is_refused_for_writing_and_read_as_is(tmp_path: Path) -> None:
    path = tmp_path / "n.duckdb"
    connect(path).close()
    with duckdb.connect(str(path)) as con:
        con.execute("INSERT INTO schema_version VALUES (?)", [SCHEMA_VERSION + 1])
    with pytest.raises(RuntimeError, match="newer than this tokenbench"):
        connect(path)
    con = connect(path, read_only=True)
    assert schema_version(con) == SCHEMA_VERSION + 1
    con.close()


def test_the_writer_keeps_partial_row_groups_and_honours_a_memory_limit(tmp_path: Path) -> None:
    con = connect(tmp_path / "m.duckdb", memory_limit="512MB")
    settings = dict(
        con.execute(
            "SELECT name, value FROM duckdb_settings() "
            "WHERE name IN ('max_vacuum_tasks', 'memory_limit')"
        ).fetchall()
    )
    assert settings["max_vacuum_tasks"] == "0"  # no rewrite of stored rows per checkpoint
    assert settings["memory_limit"] in ("488.2 MiB", "512.0 MB")
    con.close()


def test_a_memory_limit_setting_must_be_a_size() -> None:
    assert DuckDBSettings(memory_limit="2GB").memory_limit == "2GB"
    with pytest.raises(ValidationError):
        DuckDBSettings(memory_limit="2GB'; DROP TABLE runs; --")
