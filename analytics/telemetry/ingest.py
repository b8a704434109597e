"""Storing server-telemetry scrapes (docs/telemetry.md), exactly once per scrape.

Scrapes arrive at least once, like record batches (a re-delivered stream entry, a
re-run consumer); each is keyed by (run_id, shard_id, attempt, scrape_seq), and a key
already in ``server_metric_scrapes`` (or twice in one call) is skipped inside the same
transaction that stores the new ones with their samples in ``server_metrics``.

The control plane calls this on its event loop, so it is built like record ingest
(analytics/store/ingest.py): the new keys are found with one anti-join of a small key table,
the rows are selected and the samples flattened in Arrow, and each table gets one Arrow
insert (a temporary table per call cost ~100 ms under load, benchmarks/telemetry.py). The
control plane stores every entry of one stream read in one call, in a thread.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from scenarios.wire.server_metrics import ipc_to_scrapes

_KEY = ("run_id", "shard_id", "attempt", "scrape_seq")
_IDENTITY = ("run_id", "stage", "provider", "region", "shard_id", "attempt", "scrape_seq")
_SCRAPE_COLUMNS = (
    "run_id", "stage", "provider", "region", "shard_id", "attempt", "worker", "scrape_seq",
    "scraped_at", "duration_ns", "status", "http_status", "error_message", "body_bytes",
)  # fmt: skip


def _first_of_each_key(incoming: pa.Table) -> list[int]:
    """Row positions of ``incoming``, the first of each key only."""
    seen: set[tuple[object, ...]] = set()
    positions = []
    columns = [incoming.column(name).to_pylist() for name in _KEY]
    for position, key in enumerate(zip(*columns, strict=True)):
        if key not in seen:
            seen.add(key)
            positions.append(position)
    return positions


def _scrape_rows(fresh: pa.Table) -> pa.Table:
    samples = fresh.column("samples").combine_chunks()
    series = pc.fill_null(pc.list_value_length(samples), 0).cast(pa.int32())
    table = fresh.select(list(_SCRAPE_COLUMNS))
    return table.append_column("series", series).append_column(
        "series_dropped", fresh.column("series_dropped")
    )


def _sample_rows(fresh: pa.Table) -> pa.Table:
    samples = fresh.column("samples").combine_chunks()
    parents = pc.list_parent_indices(samples)
    flat = pc.list_flatten(samples)
    identity = fresh.select([*_IDENTITY, "scraped_at"]).take(parents)
    return (
        identity.append_column("metric", flat.field("metric"))
        .append_column("labels", flat.field("labels"))
        .append_column("value", flat.field("value"))
    )


def ingest_scrapes(con: duckdb.DuckDBPyConnection, payloads: Sequence[bytes]) -> int:
    """Store the new scrapes of ``payloads`` (Arrow IPC of scrape rows) and their samples
    in one transaction; return how many scrapes were new."""
    if not payloads:
        return 0
    incoming = pa.concat_tables([ipc_to_scrapes(p) for p in payloads])
    candidates = _first_of_each_key(incoming)
    keys = incoming.select(list(_KEY)).take(candidates)
    keys = keys.append_column("position", pa.array(candidates, pa.int64()))
    con.execute("BEGIN TRANSACTION")
    try:
        con.register("incoming_scrape_keys", keys)
        fresh_positions = [
            row[0]
            for row in con.execute(
                "SELECT k.position FROM incoming_scrape_keys AS k "
                "ANTI JOIN server_metric_scrapes AS s "
                "USING (run_id, shard_id, attempt, scrape_seq) ORDER BY k.position"
            ).fetchall()
        ]
        con.unregister("incoming_scrape_keys")
        if fresh_positions:
            fresh = incoming.take(fresh_positions)
            for table, rows in (
                ("server_metric_scrapes", _scrape_rows(fresh)),
                ("server_metrics", _sample_rows(fresh)),
            ):
                con.register("incoming_rows", rows)
                con.execute(f"INSERT INTO {table} SELECT * FROM incoming_rows")  # noqa: S608
                con.unregister("incoming_rows")
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    return len(fresh_positions)
