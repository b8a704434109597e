"""The report's most frequent error messages, per stage × provider × region.

A run in which requests failed says why in its report, not only how many
(``errors_by_class``): each group's :data:`TOP_MESSAGES` most frequent (error class,
message) pairs with their counts. A run reported from its raw records counts them there
(``top_errors.sql``); a large run reported from stored aggregates reads each shard's
stored list instead (``stored_top_errors.sql``, schema_v8.sql), as every other figure of
such a report does.

Messages are redacted by the worker that records them (scenarios/redaction.py); they are
redacted again here, so a file written by an older version shows nothing the current
rules hide, and pairs that then read alike are counted as one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb

from analytics.sql.files import load_sql
from scenarios.redaction import redact

__all__ = [
    "ERRORS_HEADER",
    "ERRORS_NOTE",
    "ERRORS_TITLE",
    "NO_MESSAGE",
    "TOP_MESSAGES",
    "error_lines",
    "error_rows",
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


# ------------------------------------------------------------------------- as text

ERRORS_TITLE = "Most frequent errors"
ERRORS_NOTE = (
    f"The {TOP_MESSAGES} most frequent causes of failed requests per provider, stage and "
    "region. Messages are redacted: secrets, URL credentials and queries removed; ids and "
    "varying numbers shown as <id>, <n>, <time> (docs/security.md)."
)
ERRORS_HEADER = ("provider", "stage", "region", "failed", "class", "message")


def _failed(stages: Sequence[dict[str, Any]]) -> dict[GroupKey, int]:
    return {
        (int(r["stage"]), str(r["provider"]), str(r["region"])): int(r.get("errors") or 0)
        for r in stages
    }


def error_rows(
    errors: Sequence[dict[str, Any]], stages: Sequence[dict[str, Any]]
) -> list[list[str]]:
    """The table of the text formats (:data:`ERRORS_HEADER`): ``failed`` is this
    message's count and the group's failed requests (``24 of 30``)."""
    failed = _failed(stages)
    rows = []
    for e in errors:
        total = failed.get((e["stage"], e["provider"], e["region"]))
        count = f"{e['count']:,}" + ("" if total is None else f" of {total:,}")
        rows.append(
            [e["provider"], str(e["stage"]), e["region"], count, e["error_class"], e["message"]]
        )
    return rows


def error_lines(errors: Sequence[dict[str, Any]], stages: Sequence[dict[str, Any]]) -> list[str]:
    """The section as plain lines, for a terminal of any width (a line may wrap, no figure
    is cut): a heading per group with its failed requests and the rate at which requests
    ended (failed ones too: the table's req/s counts successes only), then a line per
    message, and how many failures had other messages."""
    if not errors:
        return []
    rows = {(int(r["stage"]), str(r["provider"]), str(r["region"])): r for r in stages}
    lines = [f"{ERRORS_TITLE} (redacted: docs/security.md)"]
    by_group: dict[GroupKey, list[dict[str, Any]]] = {}
    for e in errors:
        by_group.setdefault((e["stage"], e["provider"], e["region"]), []).append(e)
    for (stage, provider, region), entries in by_group.items():
        head = f"  {provider} · stage {stage} · {region}"
        row = rows.get((stage, provider, region))
        failed = None if row is None else int(row.get("errors") or 0)
        if row is not None:
            head += f": {failed:,} of {int(row.get('requests') or 0):,} requests failed"
            attempted = row.get("attempted_request_rate")
            if attempted is not None:
                head += f" (attempted {attempted:,.2f} req/s)"
        lines.append(head)
        width = max(len(e["error_class"]) for e in entries)
        lines += [
            f"    {e['count']:>7,}  {e['error_class']:<{width}}  {e['message']}" for e in entries
        ]
        rest = (failed or 0) - sum(int(e["count"]) for e in entries)
        if rest > 0:
            lines.append(f"    {rest:>7,}  with other messages")
    return lines
