"""Storing server-telemetry scrapes (docs/telemetry.md), exactly once per scrape.

Scrapes arrive at least once, like record batches (a re-delivered stream entry, a
re-run consumer); each is keyed by (run_id, shard_id, attempt, scrape_seq), and a key
already in ``server_metric_scrapes`` (or twice in one call) is skipped inside the same
transaction that stores the new ones with their samples in ``server_metrics``.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pyarrow as pa

from scenarios.server_metrics import ipc_to_scrapes


def ingest_scrapes(con: duckdb.DuckDBPyConnection, payloads: Sequence[bytes]) -> int:
    """Store the new scrapes of ``payloads`` (Arrow IPC of scrape rows) and their samples
    in one transaction; return how many scrapes were new."""
    if not payloads:
        return 0
    incoming = pa.concat_tables([ipc_to_scrapes(p) for p in payloads])
    con.execute("BEGIN TRANSACTION")
    try:
        con.register("incoming_scrapes", incoming)
        con.execute(
            """
            CREATE OR REPLACE TEMP TABLE fresh_scrapes AS
            SELECT * FROM (
                SELECT *, row_number() OVER (
                    PARTITION BY run_id, shard_id, attempt, scrape_seq) AS copy
                FROM incoming_scrapes
            ) AS i
            WHERE copy = 1 AND NOT EXISTS (
                SELECT 1 FROM server_metric_scrapes AS s
                WHERE s.run_id = i.run_id AND s.shard_id = i.shard_id
                  AND s.attempt = i.attempt AND s.scrape_seq = i.scrape_seq)
            """
        )
        con.unregister("incoming_scrapes")
        con.execute(
            """
            INSERT INTO server_metric_scrapes
            SELECT run_id, stage, provider, region, shard_id, attempt, worker, scrape_seq,
                   scraped_at, duration_ns, status, http_status, error_message, body_bytes,
                   coalesce(len(samples), 0), series_dropped
            FROM fresh_scrapes
            """
        )
        con.execute(
            """
            INSERT INTO server_metrics
            SELECT run_id, stage, provider, region, shard_id, attempt, scrape_seq,
                   scraped_at, sample.metric, sample.labels, sample.value
            FROM (SELECT *, unnest(samples) AS sample FROM fresh_scrapes)
            """
        )
        row = con.execute("SELECT count(*) FROM fresh_scrapes").fetchone()
        con.execute("DROP TABLE fresh_scrapes")
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    return int(row[0]) if row else 0
