"""``/v1/trends``: a schedule's (or a scenario's) figures across its runs, and whether the
latest run regressed (analytics/trends/build.py), as JSON, markdown, CSV or an HTML chart."""

from __future__ import annotations

from typing import Annotated

import duckdb
from fastapi import APIRouter, Header, Query, Response

from analytics.trends.build import DEFAULT_TREND_RUNS, TrendOptions, TrendSelection, build_trend
from analytics.trends.formats import TREND_FORMATS, TrendFormat
from analytics.trends.regression import DEFAULT_MIN_CHANGE, DEFAULT_WINDOW
from api.access.caller import Caller
from api.access.ownership import Kind, check_read, named, visible_sql
from api.rest.deps import Authenticated, CallerDep, HeavyDep, WriterDep
from api.rest.errors import UnknownScenarioError
from api.rest.negotiation import chosen_format
from api.rest.routes.runs import REPORT_HEADERS
from api.schedules.store import ScheduleStore
from scenarios.limits import MAX_ID_CHARS, MAX_TREND_RUNS, MinChange, TrendWindow

router = APIRouter(prefix="/v1/trends", tags=["trends"], dependencies=[Authenticated])


def trend_format(name: str | None, accept: str | None) -> TrendFormat:
    """The format named by ``?format=``, else the one ``Accept`` prefers (JSON when it
    names nothing); an unknown name is a 422, an Accept header served by none a 406."""
    return chosen_format(name, accept, TREND_FORMATS)


@router.get(
    "",
    responses={
        200: {"content": {fmt.media_type: {} for fmt in TREND_FORMATS.values()}},
        406: {"description": "The Accept header names none of the formats."},
    },
)
async def get_trend(
    writer: WriterDep,
    heavy: HeavyDep,
    caller: CallerDep,
    schedule_id: Annotated[str | None, Query(max_length=MAX_ID_CHARS)] = None,
    scenario_id: Annotated[str | None, Query(max_length=MAX_ID_CHARS)] = None,
    name: Annotated[
        str | None, Query(max_length=MAX_ID_CHARS, description="Runs of this scenario name.")
    ] = None,
    provider: Annotated[
        str | None,
        Query(
            max_length=MAX_ID_CHARS,
            description="Every run that measured this provider, imported runs included.",
        ),
    ] = None,
    model: Annotated[
        str | None, Query(max_length=MAX_ID_CHARS, description="With provider: this model.")
    ] = None,
    runs: Annotated[
        int, Query(ge=1, le=MAX_TREND_RUNS, description="The newest runs read.")
    ] = DEFAULT_TREND_RUNS,
    window: Annotated[
        TrendWindow | None,
        Query(
            description=f"Earlier runs the latest is judged against (the schedule's, else "
            f"{DEFAULT_WINDOW}).",
        ),
    ] = None,
    min_change: Annotated[
        MinChange | None,
        Query(
            description=f"Smallest relative change that counts (the schedule's, else "
            f"{DEFAULT_MIN_CHANGE}).",
        ),
    ] = None,
    as_of: Annotated[
        str | None,
        Query(
            max_length=MAX_ID_CHARS,
            description="Judge this run as the latest (later runs left out): the verdict then.",
        ),
    ] = None,
    output: Annotated[
        str | None,
        Query(alias="format", max_length=32, description=f"One of {', '.join(TREND_FORMATS)}."),
    ] = None,
    accept: Annotated[str | None, Header()] = None,
) -> Response:
    """Per provider × region × stage: TTFT p50/p99, output tok/s, error rate and $/1M
    output over the runs, and the latest run judged against the runs before it."""
    fmt = trend_format(output, accept)
    selection = TrendSelection(
        schedule_id=schedule_id, scenario_id=scenario_id, name=name, provider=provider, model=model
    )
    # Up to MAX_TREND_RUNS runs read and judged: in a heavy-work thread (api/rest/offload.py).
    return await heavy.on_cursor(
        "a trend", writer, _trend, caller, selection, fmt, window, min_change, runs, as_of
    )


def _trend(
    cursor: duckdb.DuckDBPyConnection,
    caller: Caller,
    selection: TrendSelection,
    fmt: TrendFormat,
    window: int | None,
    min_change: float | None,
    runs: int,
    as_of: str | None,
) -> Response:
    schedule_id, scenario_id = selection.schedule_id, selection.scenario_id
    default_window, default_change = DEFAULT_WINDOW, DEFAULT_MIN_CHANGE
    # The schedule and scenario named, and every run read: ones the caller may read
    # (404 for the others, as for unknown ones; docs/teams.md).
    if schedule_id is not None:
        check_read(cursor, caller, Kind.SCHEDULE, schedule_id)
    if scenario_id is not None:
        check_read(cursor, caller, Kind.SCENARIO, scenario_id)
    if schedule_id is not None:
        schedule = ScheduleStore(cursor).get(schedule_id, deleted=True)
        default_window, default_change = schedule.trend_window, schedule.min_change
    if (
        scenario_id is not None
        and not cursor.execute(
            "SELECT 1 FROM api_scenarios WHERE scenario_id = ?", [scenario_id]
        ).fetchall()
    ):
        raise UnknownScenarioError(scenario_id)
    options = TrendOptions(
        runs=runs,
        window=default_window if window is None else window,
        min_change=default_change if min_change is None else min_change,
        as_of=as_of,
        visible=named(visible_sql(Kind.RUN, caller, "r.run_id")),
    )
    report = build_trend(cursor, selection, options)
    headers = {"x-content-type-options": "nosniff", "vary": "Accept"}
    headers.update(REPORT_HEADERS.get(fmt.name, {}))
    return Response(fmt.render(report), media_type=fmt.media_type, headers=headers)
