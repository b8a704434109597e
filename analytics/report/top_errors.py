"""The report's most frequent error messages, per stage × provider × region.

A run in which requests failed says why in its report, not only how many
(``errors_by_class``): each group's :data:`TOP_MESSAGES` most frequent (error class,
message) pairs with their counts. A run reported from its raw records counts them there
(``top_errors.sql``); a large run reported from stored aggregates reads each shard's
stored list instead (``stored_top_errors.sql``, schema_v8.sql), as every other figure of
such a report does.

Messages are redacted by the worker that records them (scenarios/security/redaction.py); they are
redacted again here, so a file written by an older version shows nothing the current
rules hide, and pairs that then read alike are counted as one.
"""

from __future__ import annotations

from typing import Any

import duckdb

from analytics.sql.files import load_sql
from scenarios.security.redaction import redact

__all__ = [
    "ERRORS_NOTE",
    "ERRORS_TITLE",
    "NO_MESSAGE",
    "TOP_MESSAGES",
    "top_errors",
]

TOP_MESSAGES = 3
# Pairs read per group before they are redacted again and merged, so that a merge cannot
# push a frequent message out of the first TOP_MESSAGES.
_FETCH_PER_GROUP = 10
NO_MESSAGE = "(no message)"

GroupKey = tuple[int, str, str]  # stage, provider, region


def top_errors(con: duckdb.DuckDBPyConnection, run_id: str, stored: bool) -> list[dict[str, Any]]:
    """Each group's most frequent failures: ``stage``, ``provider``, ``region``,
    ``error_class``, ``message`` (redacted) and ``count``, by group, most frequent first.
    ``stored``: read the shards' stored lists, not the raw records."""
    sql = load_sql("stored_top_errors" if stored else "top_errors")
    answer = con.execute(sql, {"run_id": run_id, "keep": _FETCH_PER_GROUP}).fetchall()
    groups: dict[GroupKey, dict[tuple[str, str], int]] = {}
    for stage, provider, region, error_class, message, n in answer:
        pairs = groups.setdefault((int(stage), str(provider), str(region)), {})
        key = (str(error_class or "unknown"), redact(message) if message else NO_MESSAGE)
        pairs[key] = pairs.get(key, 0) + int(n)
    out = []
    for (stage, provider, region), pairs in sorted(groups.items(), key=lambda g: _order(g[0])):
        ranked = sorted(pairs.items(), key=lambda item: (-item[1], item[0]))
        out += [
            {
                "stage": stage,
                "provider": provider,
                "region": region,
                "error_class": error_class,
                "message": message,
                "count": count,
            }
            for (error_class, message), count in ranked[:TOP_MESSAGES]
        ]
    return out


def _order(key: GroupKey) -> tuple[str, int, str]:
    # The summary table's order: provider, stage, region.
    stage, provider, region = key
    return provider, stage, region


# ----------------------------------------------- as text (analytics/sections/errors.py)

ERRORS_TITLE = "Most frequent errors"
ERRORS_NOTE = (
    f"The {TOP_MESSAGES} most frequent causes of failed requests per provider, stage and "
    "region. Messages are redacted: secrets, URL credentials and queries removed; ids and "
    "varying numbers shown as <id>, <n>, <time> (docs/security.md)."
)
