"""``GET /v1/audit``: the audit log, newest first, for admins.

Every change (tokens minted and revoked, team settings, runs, schedules, datasets, SQL
queries) is appended by api/access/audit.py with who (token id, team, role), when, what
and the outcome (``ok``, ``refused``, ``failed``). An entry never holds a token or a
secret. The answer is bounded: at most ``limit`` entries (≤ 10,000) matching every
filter given. docs/teams.md, "The audit log".

Who may call: an admin (anyone else gets 403).
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

import orjson
from fastapi import APIRouter, Query
from pydantic import BaseModel

from api.access.inputs import (
    ACTION_PATTERN,
    MAX_AUDIT_ROWS,
    MAX_TEAM_CHARS,
    TEAM_PATTERN,
    TOKEN_ID_PATTERN,
)
from api.rest.deps import AdminDep, CursorDep
from scenarios.limits import MAX_ID_CHARS

# An object's id as recorded (a run, a dataset, a token, a team): printable, no spaces.
OBJECT_ID_PATTERN = r"^[!-~]+$"

router = APIRouter(prefix="/v1/audit", tags=["audit"])


class AuditEntry(BaseModel):
    """One entry of the audit log."""

    seq: int
    happened_at: dt.datetime
    token_id: str | None
    team: str | None
    role: str | None
    action: str
    object_kind: str | None
    object_id: str | None
    outcome: str
    detail: dict[str, Any] | None


_COLUMNS = "seq, happened_at, token_id, team, role, action, object_kind, object_id, outcome, detail"


@router.get("", response_model=list[AuditEntry])
def read_audit(
    _: AdminDep,
    con: CursorDep,
    team: Annotated[str | None, Query(pattern=TEAM_PATTERN, max_length=MAX_TEAM_CHARS)] = None,
    token_id: Annotated[str | None, Query(pattern=TOKEN_ID_PATTERN, max_length=17)] = None,
    action: Annotated[str | None, Query(pattern=ACTION_PATTERN, max_length=64)] = None,
    outcome: Literal["ok", "refused", "failed"] | None = None,
    object_kind: Annotated[str | None, Query(pattern=ACTION_PATTERN, max_length=64)] = None,
    object_id: Annotated[
        str | None, Query(pattern=OBJECT_ID_PATTERN, max_length=MAX_ID_CHARS)
    ] = None,
    since: Annotated[dt.datetime | None, Query(description="Entries at or after.")] = None,
    until: Annotated[dt.datetime | None, Query(description="Entries before.")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_AUDIT_ROWS)] = 100,
) -> list[AuditEntry]:
    """Audit entries, newest first, matching every filter given (admin). ``team`` and
    ``token_id`` name the caller; ``object_kind`` and ``object_id`` what was acted on
    (e.g. ``team`` and ``search`` for the changes to team search's settings)."""
    conditions: list[str] = []
    params: list[object] = []
    # Column names are fixed here; every value is a bound parameter.
    for column, value in (
        ("team", team),
        ("token_id", token_id),
        ("action", action),
        ("outcome", outcome),
        ("object_kind", object_kind),
        ("object_id", object_id),
    ):
        if value is not None:
            conditions.append(f"{column} = ?")
            params.append(value)
    if since is not None:
        conditions.append("happened_at >= ?")
        params.append(_utc(since))
    if until is not None:
        conditions.append("happened_at < ?")
        params.append(_utc(until))
    where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
    rows = con.execute(
        f"SELECT {_COLUMNS} FROM audit_log {where} ORDER BY seq DESC LIMIT ?",  # noqa: S608
        [*params, limit],
    ).fetchall()
    return [
        AuditEntry(
            seq=row[0],
            happened_at=row[1],
            token_id=row[2],
            team=row[3],
            role=row[4],
            action=row[5],
            object_kind=row[6],
            object_id=row[7],
            outcome=row[8],
            detail=None if row[9] is None else orjson.loads(row[9]),
        )
        for row in rows
    ]


def _utc(moment: dt.datetime) -> dt.datetime:
    """A naive time is read as UTC, as every stored time is."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)
