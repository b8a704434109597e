"""``/v1/shadow-sessions``: open and stop shadow-traffic sessions, read their comparison.

A gateway (``tokenbench gateway``) opens a session when it starts and stops it when it
exits; its records and captures are ingested by the control loop meanwhile
(docs/shadow.md).
"""

from __future__ import annotations

from typing import Annotated, Any

import duckdb
from fastapi import APIRouter, Query, Response
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from analytics.shadow.capture import comparison, pairs, session_summary
from analytics.shadow.replay import replay_jsonl
from api.access.audit import audit
from api.access.caller import Caller
from api.access.ownership import Kind, check_change, check_read, record_owner, visible_sql
from api.control.dispatch import live_worker_count
from api.rest.deps import (
    Authenticated,
    CallerDep,
    HeavyDep,
    PlaneDep,
    RedisDep,
    SettingsDep,
    SubmitterDep,
    WriterDep,
)
from api.rest.errors import BodyProblems, RegionUnavailable, UnknownShadowSessionError
from api.rest.validation import check_gateway_egress
from api.schemas import GatewayConfigBody
from scenarios.errors import TokenbenchError
from scenarios.gateway_config import parse_gateway_config
from scenarios.limits import ListLimit
from scenarios.loader import ScenarioError

router = APIRouter(prefix="/v1/shadow-sessions", tags=["shadow"], dependencies=[Authenticated])

NDJSON = "application/x-ndjson"


class SessionCreate(BaseModel):
    """A gateway configuration to open a session for."""

    config: GatewayConfigBody = Field(description="The gateway config (docs/shadow.md).")
    wait_for_workers: bool = Field(
        default=False, description="Open even if a region has no live worker yet."
    )


class SessionCreated(BaseModel):
    """The opened session."""

    id: str
    state: str
    shards: list[str]


def _summary(cursor: duckdb.DuckDBPyConnection, session_id: str) -> dict[str, Any]:
    summary = session_summary(cursor, session_id)
    if summary is None:
        raise UnknownShadowSessionError(session_id)
    return summary


@router.post("", status_code=201, response_model=SessionCreated)
async def open_session(
    body: SessionCreate,
    plane: PlaneDep,
    redis: RedisDep,
    settings: SettingsDep,
    heavy: HeavyDep,
    caller: SubmitterDep,
) -> SessionCreated:
    """Open a shadow session (the caller's team's); 409 if a shadow region has no live
    worker."""
    try:
        # Off the event loop: a config may hold up to MAX_DOCUMENT_NODES values.
        config = await heavy.run("a gateway config", parse_gateway_config, body.config, "config")
    except ScenarioError as exc:
        raise BodyProblems.of_document(exc, "config") from None
    check_gateway_egress(config, settings.egress)
    missing = [r for r in config.regions if await live_worker_count(redis, r) == 0]
    if missing and not body.wait_for_workers:
        raise RegionUnavailable(missing)
    coordinator = await plane.open_session(config)
    record_owner(plane.con, Kind.SESSION, coordinator.run_id, caller)
    audit(plane.con, caller, "session.open", "session", coordinator.run_id, "ok")
    shards = plane.con.execute(
        "SELECT shard_id FROM shards WHERE run_id = ? ORDER BY shard_id", [coordinator.run_id]
    ).fetchall()
    return SessionCreated(
        id=coordinator.run_id, state=coordinator.state, shards=[str(s[0]) for s in shards]
    )


# Summaries, comparisons, pairs and replay logs read every record of a session: in the
# shared heavy-work threads (api/rest/offload.py), never on the event loop.


@router.get("")
async def list_sessions(
    writer: WriterDep,
    heavy: HeavyDep,
    caller: CallerDep,
    limit: Annotated[ListLimit, Query()] = 100,
) -> list[dict[str, Any]]:
    """Recent shadow sessions the caller may read, newest first."""
    return await heavy.on_cursor("the list of shadow sessions", writer, _sessions, caller, limit)


def _sessions(
    cursor: duckdb.DuckDBPyConnection, caller: Caller, limit: int
) -> list[dict[str, Any]]:
    visible, params = visible_sql(Kind.SESSION, caller, "shadow_sessions.run_id")
    ids = cursor.execute(
        f"SELECT run_id FROM shadow_sessions WHERE {visible} "  # noqa: S608
        "ORDER BY created_at DESC LIMIT ?",
        [*params, limit],
    ).fetchall()
    return [_summary(cursor, str(row[0])) for row in ids]


@router.get("/{session_id}")
async def get_session(
    session_id: str, writer: WriterDep, heavy: HeavyDep, caller: CallerDep
) -> dict[str, Any]:
    """State, requests captured and sampled, records per shard."""
    check_read(writer, caller, Kind.SESSION, session_id)
    return await heavy.on_cursor("a shadow session", writer, _summary, session_id)


@router.post("/{session_id}/stop", status_code=202)
async def stop_session(
    session_id: str,
    plane: PlaneDep,
    writer: WriterDep,
    heavy: HeavyDep,
    caller: SubmitterDep,
    drain_s: Annotated[float, Query(ge=0, le=600)] = 10.0,
) -> dict[str, Any]:
    """Stop a session (its team's or an admin's): records arriving within ``drain_s``
    are still stored."""
    check_read(writer, caller, Kind.SESSION, session_id)
    summary = await heavy.on_cursor("a shadow session", writer, _summary, session_id)
    try:
        check_change(writer, caller, Kind.SESSION, session_id)
    except TokenbenchError as exc:
        audit(writer, caller, "session.stop", "session", session_id, "refused",
              error=type(exc).__name__)  # fmt: skip
        raise
    if session_id in plane.runs:
        await plane.cancel(session_id, drain_s)
        summary["state"] = "stopping"
    audit(writer, caller, "session.stop", "session", session_id, "ok")
    return summary


def _comparison(cursor: duckdb.DuckDBPyConnection, session_id: str) -> dict[str, Any]:
    _summary(cursor, session_id)
    return {"session": session_id, "comparison": comparison(cursor, session_id)}


@router.get("/{session_id}/comparison")
async def get_comparison(
    session_id: str, writer: WriterDep, heavy: HeavyDep, caller: CallerDep
) -> dict[str, Any]:
    """Each shadow against the primary over the same requests, per region."""
    check_read(writer, caller, Kind.SESSION, session_id)
    return await heavy.on_cursor("a shadow comparison", writer, _comparison, session_id)


def _pairs(cursor: duckdb.DuckDBPyConnection, session_id: str) -> JSONResponse:
    _summary(cursor, session_id)
    # Encoded here: a session may have many pairs (FastAPI would encode them on the loop).
    return JSONResponse(jsonable_encoder(pairs(cursor, session_id)))


@router.get("/{session_id}/pairs", response_model=list[dict[str, Any]])
async def get_pairs(
    session_id: str, writer: WriterDep, heavy: HeavyDep, caller: CallerDep
) -> Response:
    """Every paired (primary, shadow) record."""
    check_read(writer, caller, Kind.SESSION, session_id)
    return await heavy.on_cursor("a shadow session's pairs", writer, _pairs, session_id)


def _replay(cursor: duckdb.DuckDBPyConnection, session_id: str) -> Response:
    _summary(cursor, session_id)
    return Response(replay_jsonl(cursor, session_id), media_type=NDJSON)


@router.get("/{session_id}/replay", responses={200: {"content": {NDJSON: {}}}})
async def get_replay(
    session_id: str, writer: WriterDep, heavy: HeavyDep, caller: CallerDep
) -> Response:
    """Captured requests (stored with text) as a replay log: timestamp, messages, max_tokens."""
    check_read(writer, caller, Kind.SESSION, session_id)
    return await heavy.on_cursor("a shadow replay log", writer, _replay, session_id)
