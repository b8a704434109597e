"""``/v1/answers``: the capacity answers and load sweeps of the runs the caller may read.

A run with ``load.find_capacity`` answers "how much load before the SLO breaks" per
provider (``capacity_results``); one with ``load.sweep`` measured a provider at several
levels (``adaptive_stages`` of role ``sweep``). Each run's report has the full answer;
this lists them across runs, newest first, so they can be found without knowing the run.
"""

from __future__ import annotations

from typing import Annotated, Any

import duckdb
from fastapi import APIRouter, Query

from api.access.caller import Caller
from api.access.ownership import Kind, visible_sql
from api.rest.deps import Authenticated, CallerDep, CursorDep
from scenarios.limits import ListLimit

router = APIRouter(prefix="/v1/answers", tags=["runs"], dependencies=[Authenticated])


@router.get("")
def list_answers(
    cursor: CursorDep, caller: CallerDep, limit: Annotated[ListLimit, Query()] = 100
) -> dict[str, list[dict[str, Any]]]:
    """``capacity``: one row per run and provider searched (state, the bracket low–high in
    req/s or streams, stages used, the answer's sentence); ``sweeps``: one row per run and
    provider swept (levels measured, lowest and highest). Only runs the caller may read."""
    return {
        "capacity": capacity_answers(cursor, caller, limit),
        "sweeps": sweeps(cursor, caller, limit),
    }


def capacity_answers(
    con: duckdb.DuckDBPyConnection, caller: Caller, limit: int
) -> list[dict[str, Any]]:
    """The capacity searches of the runs ``caller`` may read, newest first."""
    visible, params = visible_sql(Kind.RUN, caller, "c.run_id")
    # ``visible`` is SQL of ours (api/access/ownership.py) with its values as parameters.
    query = (
        "SELECT c.run_id, r.name, r.created_at, c.provider, c.search_by, c.state, c.low, "  # noqa: S608
        "c.high, c.stages, c.message FROM capacity_results AS c JOIN runs AS r USING (run_id) "
        "WHERE " + visible + " ORDER BY r.created_at DESC, c.provider LIMIT ?"
    )
    rows = con.execute(query, [*params, limit]).fetchall()
    keys = ("run_id", "name", "created_at", "provider", "search_by", "state", "low", "high")
    return [
        {**dict(zip(keys, row[:8], strict=True)), "stages": row[8], "message": row[9]}
        for row in rows
    ]


def sweeps(con: duckdb.DuckDBPyConnection, caller: Caller, limit: int) -> list[dict[str, Any]]:
    """The load sweeps of the runs ``caller`` may read, newest first."""
    visible, params = visible_sql(Kind.RUN, caller, "a.run_id")
    query = (
        "SELECT a.run_id, any_value(r.name), any_value(r.created_at), a.provider, "
        "any_value(a.load_kind), count(*), min(a.level), max(a.level) "
        "FROM adaptive_stages AS a JOIN runs AS r USING (run_id) "
        "WHERE a.role = 'sweep' AND " + visible + " GROUP BY a.run_id, a.provider "
        "ORDER BY any_value(r.created_at) DESC, a.provider LIMIT ?"
    )
    rows = con.execute(query, [*params, limit]).fetchall()
    keys = ("run_id", "name", "created_at", "provider", "load_kind", "levels", "low", "high")
    return [dict(zip(keys, row, strict=True)) for row in rows]
