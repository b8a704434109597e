"""``/v1/sql``: read-only SQL over the results, sandboxed, away from the ingest writer.

Each query runs in a child process (analytics/query/sql_process.py) on a read-only copy of the
database (analytics/query/snapshot.py), under analytics/query/safe_sql.py's rules: one SELECT, no
file or network access, no extensions, locked configuration, memory and thread caps, a
statement timeout (the child is killed if it overruns) and a row cap. The copy is
refreshed when it is older than the request's ``max_staleness_s``; the answer says how
old its data is (``X-Tokenbench-Snapshot-Age-S``).

The copy is the caller's scope's (docs/teams.md, "SQL sees what you may see"): an
admin's holds everything; a team's holds only the rows the team may read, and no admin
table, so the query process cannot read what the caller may not, whatever the SQL says.
Every query is audited: the SHA-256 of its text, its row count and its outcome.

Answers are capped in bytes (``TOKENBENCH__API__SQL_MAX_BYTES``): the child encodes the
answer and stops as soon as it exceeds the cap, and this process relays at most that
many bytes (413 above), so a huge result never reaches the control plane's memory.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterator
from typing import Annotated, Literal

import duckdb
from fastapi import APIRouter, Header, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from analytics.query.safe_sql import SqlLimits
from analytics.query.snapshot import ADMIN_SCOPE, SnapshotInfo, SqlScope, SqlSnapshots
from analytics.query.sql_process import ChildResult, run_in_child
from api.access.audit import audit
from api.access.caller import Caller
from api.access.ownership import visible_sql
from api.rest.deps import Authenticated, CallerDep, SettingsDep, WriterDep
from scenarios.errors import TokenbenchError
from scenarios.limits import MAX_SQL_ANSWER_ROWS

router = APIRouter(prefix="/v1/sql", tags=["sql"], dependencies=[Authenticated])

MEDIA = {
    "json": "application/json",
    "csv": "text/csv",
    "arrow": "application/vnd.apache.arrow.stream",
    "parquet": "application/vnd.apache.parquet",
}
# Queries running at once; more wait. Each is a process with up to 1.5 GB and one thread,
# and its answer (at most TOKENBENCH__API__SQL_MAX_BYTES) is held here while relayed.
MAX_CONCURRENT_QUERIES = 2


class SqlQuery(BaseModel):
    """One read-only query and how to answer it."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=100_000, description="One SELECT statement.")
    format: Literal["json", "csv", "arrow", "parquet"] | None = Field(
        None, description="Answer format; default: from the Accept header, else JSON."
    )
    max_rows: int = Field(
        10_000, ge=1, le=MAX_SQL_ANSWER_ROWS, description="Row cap of the answer."
    )
    timeout_s: float = Field(30.0, gt=0, le=300, description="Statement timeout (seconds).")
    max_staleness_s: float = Field(
        30.0,
        ge=0,
        le=3600,
        description="Oldest acceptable data: an older database copy is refreshed first.",
    )


def _format(body: SqlQuery, accept: str | None) -> str:
    if body.format is not None:
        return body.format
    for name, media in MEDIA.items():
        if media in (accept or ""):
            return name
    return "json"


def sql_scope(caller: Caller) -> SqlScope:
    """The copy ``caller``'s queries read: everything for an admin, else its team's."""
    if caller.is_admin:
        return ADMIN_SCOPE
    return SqlScope.of_team(caller.team, lambda kind, column: visible_sql(kind, caller, column))


def _state(
    request: Request, writer: duckdb.DuckDBPyConnection
) -> tuple[SqlSnapshots, asyncio.Semaphore]:
    """The app's snapshots (one per scope) and query slots, created on first use."""
    state = request.app.state
    if getattr(state, "sql_snapshot", None) is None:
        state.sql_snapshot = SqlSnapshots.of(writer)
        state.sql_slots = asyncio.Semaphore(MAX_CONCURRENT_QUERIES)
    return state.sql_snapshot, state.sql_slots


def _json_parts(result: ChildResult, snapshot: SnapshotInfo) -> Iterator[bytes]:
    """The JSON answer around the child's encoded rows, without decoding them again."""
    yield b'{"columns": ' + json.dumps(result.columns).encode() + b', "rows": '
    yield result.payload
    tail = {
        "row_count": result.rows,
        "truncated": result.truncated,
        "snapshot_age_s": round(snapshot.age_s, 3),
    }
    yield b", " + json.dumps(tail).encode()[1:]


@router.post(
    "",
    responses={
        200: {"content": {m: {} for m in MEDIA.values()}},
        400: {},
        403: {},
        408: {},
        413: {"description": "The answer exceeds TOKENBENCH__API__SQL_MAX_BYTES."},
    },
)
async def run_sql(
    body: SqlQuery,
    request: Request,
    writer: WriterDep,
    settings: SettingsDep,
    caller: CallerDep,
    accept: Annotated[str | None, Header()] = None,
) -> Response:
    """Run one read-only SELECT on a recent copy of the results the caller may read;
    JSON, CSV, Arrow or Parquet. Answers larger than TOKENBENCH__API__SQL_MAX_BYTES are
    refused with 413."""
    fmt = _format(body, accept)
    snapshots, slots = _state(request, writer)
    scope = sql_scope(caller)
    digest = hashlib.sha256(body.query.encode()).hexdigest()
    limits = SqlLimits(
        max_rows=body.max_rows, timeout_s=body.timeout_s, max_bytes=settings.api.sql_max_bytes
    )
    # A query that does not run raises an error of the tree (SqlError, SqlUnavailable):
    # api/rest/errors.py answers it with its status and the SQL ``kind``.
    async with slots:
        info = await asyncio.to_thread(snapshots.ensure, writer, scope, body.max_staleness_s)
        try:
            result = await run_in_child(info.path, body.query, limits, fmt)
        except TokenbenchError as exc:
            kind = getattr(exc, "sql_kind", type(exc).__name__)
            audit(writer, caller, "sql.query", None, None, "refused", sha256=digest, kind=kind)
            raise
    audit(
        writer, caller, "sql.query", None, None, "ok",
        sha256=digest, rows=result.rows, scope=scope.key,
    )  # fmt: skip
    headers = {
        "X-Tokenbench-Rows": str(result.rows),
        "X-Tokenbench-Truncated": "true" if result.truncated else "false",
        "X-Tokenbench-Snapshot-Age-S": f"{info.age_s:.3f}",
    }
    if fmt == "json":
        # Streamed in three parts: the rows are relayed as the child encoded them.
        return StreamingResponse(_json_parts(result, info), media_type=MEDIA[fmt], headers=headers)
    return Response(result.payload, media_type=MEDIA[fmt], headers=headers)
