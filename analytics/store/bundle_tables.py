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

from analytics.store.db import connect

__all__ = [
    "BUNDLE_TABLES",
    "EXCLUDED",
    "GROUP_KEYED",
    "main",
    "markdown_tables",
    "table_columns",
]

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
    "run_imports": ("run_id",),
    "import_notes": ("run_id",),
    "import_summaries": ("run_id", "stage", "provider", "figure", "stat"),
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
        "import_notes",
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


def markdown_tables(con: duckdb.DuckDBPyConnection) -> str:
    """The member tables of a bundle as docs/results-schema.md lists them (generated, and
    held to the page by a test): each table's key and its columns with their types, read
    from ``con`` at the current schema."""
    out: list[str] = []
    for table, key in BUNDLE_TABLES.items():
        kind = "group key" if table in GROUP_KEYED else "key"
        out.append(f"#### `{table}.parquet`\n")
        out.append(f"Table `{table}`, {kind} ({', '.join(f'`{k}`' for k in key)}).\n")
        out.append("| column | type |\n| --- | --- |")
        out.extend(f"| `{name}` | {kind_} |" for name, kind_ in table_columns(con, table))
        out.append("")
    out.append("#### Tables with a `run_id` a bundle leaves out\n")
    out.append("| table | why |\n| --- | --- |")
    out.extend(f"| `{table}` | {why} |" for table, why in EXCLUDED.items())
    return "\n".join(out) + "\n"


def main() -> None:
    """Print :func:`markdown_tables` of a fresh database (``python -m
    analytics.store.bundle_tables``), to paste into docs/results-schema.md."""
    con = connect(":memory:")
    print(markdown_tables(con), end="")
    con.close()


if __name__ == "__main__":
    main()
