"""Which tables a run bundle carries, and the key that makes its import exactly once.

A bundle (docs/results-schema.md) holds every row of one run: each table below that has
a ``run_id`` column, filtered to the run. Every other table that has one is named in
:data:`EXCLUDED` with the reason; a test holds the two lists to the schema, so a table
a migration adds is either bundled or left out on purpose, never forgotten.

Each bundled table has a key. A row is added on import only when no stored row has
the same key: the same bundle imported twice, or a run imported into the file it came
from, adds nothing. For the tables whose rows are written together and have no unique
key of their own (a shard's error counts, histogram buckets, a scrape's samples), the
key names the group: its rows are added when none of the group's is stored.
"""

from __future__ import annotations

import duckdb

__all__ = ["BUNDLE_TABLES", "EXCLUDED", "GROUP_KEYED", "table_columns"]

# Table -> key columns, in the order an import inserts them (the run first).
BUNDLE_TABLES: dict[str, tuple[str, ...]] = {
    "runs": ("run_id",),
    "run_origins": ("run_id",),
    "slos": ("run_id",),
    "providers": ("run_id", "provider"),
    "regions": ("run_id", "region"),
    "shards": ("run_id", "shard_id"),
    "shard_attempts": ("run_id", "shard_id", "attempt"),
    "ingested_batches": ("run_id", "shard_id", "attempt", "batch_seq"),
    "request_records": ("run_id", "shard_id", "attempt", "seq"),
    "shard_summaries": ("run_id", "shard_id"),
    "shard_errors": ("run_id", "shard_id"),
    "shard_error_messages": ("run_id", "shard_id"),
    "shard_histograms": ("run_id", "shard_id"),
    "server_metric_scrapes": ("run_id", "shard_id", "attempt", "scrape_seq"),
    "server_metrics": ("run_id", "shard_id", "attempt", "scrape_seq"),
    "cache_resets": ("run_id", "shard_id", "attempt"),
    "server_spans": ("run_id", "provider", "request_id"),
    "upstream_requests": ("run_id", "upstream", "seq"),
    "upstream_logs": ("run_id", "upstream"),
    "adaptive_stages": ("run_id", "stage", "provider"),
    "stage_outcomes": ("run_id", "stage", "provider"),
    "stage_verdicts": ("run_id", "stage", "provider"),
    "capacity_results": ("run_id", "provider"),
}

# Tables whose key names a group of rows rather than one row (see the module's doc).
GROUP_KEYED = frozenset(
    {
        "shard_errors",
        "shard_error_messages",
        "shard_histograms",
        "server_metrics",
        "cache_resets",
        "server_spans",
    }
)

# Tables with a run_id that a bundle leaves out, and why.
EXCLUDED: dict[str, str] = {
    "spend_ledger": "a team's spending, charged where the run ran (teams, budgets)",
    "run_cost_bounds": "the submitting team's budget check, not a result",
    "run_queue": "a waiting run's request: team, token, targets",
    "schedule_webhooks": "a schedule's notifications, not the run's",
    "schedule_fires": "a schedule's fires, not the run's",
    "shadow_sessions": "shadow-traffic sessions are not runs (not exported)",
    "shadow_captures": "shadow-traffic sessions are not runs (not exported)",
}


def table_columns(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[str, str]]:
    """``table``'s columns in ``con``, in order: (name, DuckDB type)."""
    rows = con.execute(
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_name = ? AND table_schema = 'main' ORDER BY ordinal_position",
        [table],
    ).fetchall()
    return [(str(name), str(kind)) for name, kind in rows]
