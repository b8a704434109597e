"""Per-shard pre-aggregates, stored when a shard settles, that the report of a large run
reads instead of the raw records.

``store_shard_summary`` (called by ``RunStore.shard_done``) replaces a shard's rows in
``shard_summaries``, ``shard_errors`` and ``shard_histograms`` (schema_v3.sql) and
``shard_error_messages`` (schema_v8.sql) with those of its accepted attempt: the sums and
counts behind every report figure, a log-bucketed histogram per latency metric
(analytics/stats/sketch.py), and its most frequent error messages. The cost is one scan of
the shard's own records, paid once while the run goes on, instead of a scan of the whole
run at every report.
"""

from __future__ import annotations

import duckdb

from analytics.sql.files import load_sql
from analytics.sql.results import first_row
from analytics.stats.sketch import LOG_GAMMA, ZERO_BUCKET

# Fixed table names (never user input), one DELETE each.
_DELETES = tuple(
    f"DELETE FROM {table} WHERE run_id = $run_id AND shard_id = $shard_id"  # noqa: S608
    for table in ("shard_summaries", "shard_errors", "shard_histograms", "shard_error_messages")
)
# Distinct (class, message) pairs kept per shard: the report shows a stage's first few,
# summed over its shards; a few more per shard keep those sums close when shards differ.
MESSAGES_PER_SHARD = 20


def store_shard_summary(con: duckdb.DuckDBPyConnection, run_id: str, shard_id: str) -> None:
    """(Re)write the pre-aggregates of a shard's accepted attempt (none if it has none).

    Runs in the caller's transaction if one is open; the caller's writes to ``shards``
    (the accepted attempt) must be visible to ``con``."""
    key = {"run_id": run_id, "shard_id": shard_id}
    for delete in _DELETES:
        con.execute(delete, key)
    con.execute(load_sql("shard_summary"), key)
    con.execute(load_sql("shard_errors"), key)
    con.execute(load_sql("shard_error_messages"), {**key, "keep": MESSAGES_PER_SHARD})
    con.execute(
        load_sql("shard_histograms"), {**key, "log_gamma": LOG_GAMMA, "zero_bucket": ZERO_BUCKET}
    )


def backfill_summaries(con: duckdb.DuckDBPyConnection) -> int:
    """Pre-aggregates of every shard that has an accepted attempt (schema v3 migration)."""
    rows = con.execute(
        "SELECT run_id, shard_id FROM shards WHERE accepted_attempt IS NOT NULL"
    ).fetchall()
    for run_id, shard_id in rows:
        store_shard_summary(con, str(run_id), str(shard_id))
    return len(rows)


def backfill_error_messages(con: duckdb.DuckDBPyConnection) -> int:
    """The stored error messages of every shard that has an accepted attempt (schema v8
    migration of a file whose other pre-aggregates are stored already)."""
    rows = con.execute(
        "SELECT run_id, shard_id FROM shards WHERE accepted_attempt IS NOT NULL"
    ).fetchall()
    for run_id, shard_id in rows:
        key = {"run_id": str(run_id), "shard_id": str(shard_id)}
        con.execute(
            "DELETE FROM shard_error_messages WHERE run_id = $run_id AND shard_id = $shard_id", key
        )
        con.execute(load_sql("shard_error_messages"), {**key, "keep": MESSAGES_PER_SHARD})
    return len(rows)


def summaries_complete(con: duckdb.DuckDBPyConnection, run_id: str) -> bool:
    """Whether every shard of the run whose records count has its pre-aggregates stored."""
    row = first_row(
        con.execute(
            """
        SELECT count(*)
        FROM shards AS s
        LEFT JOIN shard_summaries AS m
          ON m.run_id = s.run_id AND m.shard_id = s.shard_id AND m.attempt = s.accepted_attempt
        WHERE s.run_id = ? AND s.accepted_attempt IS NOT NULL AND s.records > 0
          AND m.shard_id IS NULL
        """,
            [run_id],
        )
    )
    return row is not None and row[0] == 0
