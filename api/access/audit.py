"""The audit log: every change and every SQL query, appended with who, when, what and
the outcome. It never holds a token or a secret: the caller is named by token id, SQL
by the SHA-256 of its text and its row count."""

from __future__ import annotations

import datetime as dt
from typing import Any

import duckdb
import orjson

from api.access.caller import Caller


def audit(
    con: duckdb.DuckDBPyConnection,
    caller: Caller | None,
    action: str,
    object_kind: str | None = None,
    object_id: str | None = None,
    outcome: str = "ok",
    **detail: Any,
) -> None:
    """Append one entry. ``detail`` holds figures and names, never a secret."""
    con.execute(
        "INSERT INTO audit_log (happened_at, token_id, team, role, action, object_kind, object_id, "
        "outcome, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            dt.datetime.now(dt.UTC),
            None if caller is None else caller.token_id,
            None if caller is None else caller.team,
            None if caller is None else caller.role.value,
            action,
            object_kind,
            object_id,
            outcome,
            orjson.dumps(detail, default=str).decode() if detail else None,
        ],
    )
