"""``/v1/runs``: start, follow, cancel runs; fetch their report and records."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Annotated

import duckdb
import pyarrow as pa
from fastapi import APIRouter, Header, Query, Response
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import TypeAdapter

from analytics.query.record_export import arrow_stream, parquet_stream, record_reader
from analytics.render.report_formats import REPORT_FORMATS, ReportFormat
from analytics.render.request_rows import request_batches, write_report_with_requests
from analytics.report.build import RunReport, UnknownRunError, build_report
from analytics.sql.results import first_row
from api.access.audit import audit
from api.access.caller import Caller
from api.access.ownership import Kind, check_change, check_read, may_read, owner_of, visible_sql
from api.control.coordinator import Coordinator
from api.control.run_views import (
    LiveState,
    live_state,
    live_view,
    queue_public,
    queued_view,
    stored_view,
)
from api.control.spend import stop_reason
from api.rest.deps import (
    Authenticated,
    CallerDep,
    CursorDep,
    HeavyDep,
    PlaneDep,
    RunStarterDep,
    SettingsDep,
    SubmitterDep,
    WriterDep,
)
from api.rest.negotiation import chosen_format
from api.rest.offload import JSON, json_response
from api.schemas import RunCreate, RunCreated, RunPublic
from scenarios.errors import BadInput, TokenbenchError
from scenarios.limits import (
    MAX_ID_CHARS,
    MAX_LISTED_SHARDS,
    MAX_REPORT_REQUEST_BYTES,
    MAX_REPORT_REQUEST_ROWS,
    ListLimit,
)

router = APIRouter(prefix="/v1/runs", tags=["runs"], dependencies=[Authenticated])

ARROW_STREAM = "application/vnd.apache.arrow.stream"
PARQUET = "application/vnd.apache.parquet"


@router.post("", status_code=201, response_model=RunCreated)
async def create_run(
    body: RunCreate,
    starter: RunStarterDep,
    caller: SubmitterDep,
    writer: WriterDep,
    dry_run: Annotated[
        bool,
        Query(description="Answer the plan and its cost bound (200); create nothing."),
    ] = False,
) -> RunCreated | JSONResponse:
    """Start a run of a stored or inline scenario; 409 if a region has no live worker,
    403 if its cost bound is above its budget (docs/teams.md). A run whose endpoints
    are in use, or whose team is at its concurrency quota, is ``queued`` (``queue``
    says why); 429 when the team's queue is full. The run belongs to the
    caller's team (``visibility``: who reads it). ``dry_run=true``: the same checks,
    then the plan (shards, requests, tokens, cost bound per provider and region,
    duration estimate) and the team's budget, 200, nothing created."""
    if dry_run:
        return JSONResponse((await starter.dry_run(body, caller)).to_json())
    try:
        started = await starter.start(body, caller)
    except TokenbenchError as exc:
        audit(writer, caller, "run.submit", "run", None, "refused", error=type(exc).__name__)
        raise
    audit(
        writer, caller, "run.submit", "run", started.run_id, "ok",
        scenario_id=body.scenario_id, visibility=body.visibility,
    )  # fmt: skip
    queued = starter.plane.queue.entry(started.run_id) if starter.plane.queue else None
    readable = _readable_by(starter.writer, caller)
    return RunCreated(
        id=started.run_id,
        state=started.state,
        shards=started.shards,
        stages=started.stages,
        queue=None if queued is None else queue_public(queued, started.waiting, readable),
    )


def _readable_by(con: duckdb.DuckDBPyConnection, caller: Caller) -> Callable[[str], bool]:
    """Whether ``caller`` may read a run (the run a queued one waits for may be another
    team's, private)."""
    return lambda run_id: may_read(con, caller, owner_of(con, Kind.RUN, run_id))


# Views, reports and record lists are built in the shared heavy-work threads, never on
# the event loop (api/rest/offload.py): the view of a 10,000-shard run is ~10,000 shard
# objects and ~2 MB of JSON, encoded there too.
_RUN_LIST = TypeAdapter(list[RunPublic])


@router.get("", response_model=list[RunPublic])
async def list_runs(
    writer: WriterDep,
    heavy: HeavyDep,
    settings: SettingsDep,
    caller: CallerDep,
    limit: Annotated[ListLimit, Query()] = 100,
) -> Response:
    """Recent runs the caller may read, newest first (stored state), with at most
    100,000 shards in all (MAX_LISTED_SHARDS): older runs past it are left out, and the
    ``X-Tokenbench-Truncated`` header says so."""
    streams = settings.control.max_streams_per_shard
    return await heavy.on_cursor("the list of runs", writer, _run_list, caller, limit, streams)


def _run_list(
    cursor: duckdb.DuckDBPyConnection, caller: Caller, limit: int, streams: int
) -> Response:
    # Newest first, as many as fit MAX_LISTED_SHARDS (the newest always does: a run has
    # at most MAX_SHARDS_PER_RUN), counted before any view is built. Only the runs the
    # caller may read, filtered in the query (docs/teams.md).
    visible, params = visible_sql(Kind.RUN, caller, "r.run_id")
    query = (
        "SELECT r.run_id, (SELECT count(*) FROM shards AS s WHERE s.run_id = r.run_id) "  # noqa: S608 - a trusted condition
        f"FROM runs AS r WHERE {visible} ORDER BY r.created_at DESC LIMIT ?"
    )
    rows = cursor.execute(query, [*params, limit]).fetchall()
    listed: list[str] = []
    shards = 0
    for run_id, count in rows:
        if listed and shards + int(count) > MAX_LISTED_SHARDS:
            break
        listed.append(str(run_id))
        shards += int(count)
    views = [stored_view(cursor, run_id, streams) for run_id in listed]
    truncated = "true" if len(listed) < len(rows) else "false"
    return Response(
        _RUN_LIST.dump_json(views), media_type=JSON, headers={"x-tokenbench-truncated": truncated}
    )


@router.get("/{run_id}", response_model=RunPublic)
async def get_run(
    run_id: str,
    plane: PlaneDep,
    writer: WriterDep,
    heavy: HeavyDep,
    settings: SettingsDep,
    caller: CallerDep,
) -> Response:
    """State and progress: per stage and shard, requests done/planned, errors, TTFT p50
    (404 for a run the caller may not read)."""
    check_read(writer, caller, Kind.RUN, run_id)
    coordinator = plane.runs.get(run_id)
    if coordinator is not None:
        state = live_state(coordinator)  # on the loop, which drives the coordinator
        return await heavy.on_cursor("a run's view", writer, _live_answer, coordinator, state)
    queued = plane.queue.entry(run_id) if plane.queue else None
    if queued is not None and plane.queue is not None:
        readable = _readable_by(writer, caller)
        return json_response(queued_view(queued, plane.queue.waiting(run_id), readable))
    streams = settings.control.max_streams_per_shard
    return await heavy.on_cursor("a run's view", writer, _stored_answer, run_id, streams)


def _stored_answer(cursor: duckdb.DuckDBPyConnection, run_id: str, streams: int) -> Response:
    return json_response(stored_view(cursor, run_id, streams))


def _live_answer(
    cursor: duckdb.DuckDBPyConnection, coordinator: Coordinator, state: LiveState
) -> Response:
    view = live_view(coordinator, coordinator.scenario.name, state)
    row = first_row(
        cursor.execute("SELECT created_at FROM runs WHERE run_id = ?", [coordinator.run_id])
    )
    view.created_at = row[0] if row else None
    # A run stopped by its budget says so from the moment the stop is recorded, also
    # while it drains and after it is settled as cancelled but not yet closed (the live
    # view, from the coordinator, would otherwise show "cancelled" with no reason).
    view.reason, view.reason_detail = stop_reason(cursor, coordinator.run_id)
    return json_response(view)


@router.post("/{run_id}/cancel", status_code=202, response_model=RunPublic)
async def cancel_run(
    run_id: str,
    plane: PlaneDep,
    writer: WriterDep,
    heavy: HeavyDep,
    settings: SettingsDep,
    caller: SubmitterDep,
) -> Response:
    """Stop a run: workers stop sending, what arrives is kept, the run ends cancelled.
    Only its team (or an admin) may: 404 for a run the caller may not read, 403 for
    another team's run it may read."""
    coordinator = plane.runs.get(run_id)
    if coordinator is None and not run_exists(writer, run_id):
        raise UnknownRunError(run_id)
    try:
        check_change(writer, caller, Kind.RUN, run_id)
    except TokenbenchError as exc:
        audit(writer, caller, "run.cancel", "run", run_id, "refused", error=type(exc).__name__)
        raise
    audit(writer, caller, "run.cancel", "run", run_id, "ok")
    if plane.queue is not None and plane.queue.cancel(run_id):
        coordinator = None  # was queued: removed from the queue, now cancelled
    if coordinator is None:
        # 404 if unknown; already ended otherwise
        streams = settings.control.max_streams_per_shard
        answer = await heavy.on_cursor("a run's view", writer, _stored_answer, run_id, streams)
    else:
        await plane.cancel(run_id)
        state = live_state(coordinator)
        answer = await heavy.run("a run's view", _live_only, coordinator, state)
    answer.status_code = 202
    return answer


def _live_only(coordinator: Coordinator, state: LiveState) -> Response:
    return json_response(live_view(coordinator, coordinator.scenario.name, state))


# The HTML report is built from what submitters wrote (names, error messages): escaped
# when rendered, and served in a sandbox (an opaque origin: no access to this origin's
# storage or API, no network) so that nothing in it can act as the control plane's page.
REPORT_HEADERS: dict[str, dict[str, str]] = {
    "html": {
        "content-security-policy": "sandbox allow-scripts; default-src 'none'; "
        "script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
        "img-src data: blob:; font-src data:"
    }
}
_FORMAT_NAMES = ", ".join(REPORT_FORMATS)


def report_format(name: str | None, accept: str | None) -> ReportFormat:
    """The format named by ``?format=``, else the one ``Accept`` prefers (JSON when it
    names nothing); an unknown name is a 422, an Accept header served by none a 406."""
    return chosen_format(name, accept, REPORT_FORMATS)


def _provider_pair(providers: str) -> tuple[str, str]:
    names = [p.strip() for p in providers.split(",")]
    if len(names) != 2 or not all(names):
        raise BadInput("providers takes two provider names: A,B")
    return names[0], names[1]


@router.get(
    "/{run_id}/report",
    responses={
        200: {"content": {fmt.media_type: {} for fmt in REPORT_FORMATS.values()}},
        406: {"description": "The Accept header names none of the formats."},
    },
)
async def get_report(
    run_id: str,
    writer: WriterDep,
    heavy: HeavyDep,
    caller: CallerDep,
    output: Annotated[
        str | None,
        Query(
            alias="format",
            max_length=32,
            description=f"One of {_FORMAT_NAMES}; default: from the Accept header, else JSON.",
        ),
    ] = None,
    compare: Annotated[
        str | None,
        Query(max_length=MAX_ID_CHARS, description="Baseline run id: ratios of this run to it."),
    ] = None,
    providers: Annotated[
        str | None,
        Query(
            max_length=2 * MAX_ID_CHARS + 1,
            description="A,B: ratios of provider B to provider A in this run.",
        ),
    ] = None,
    requests: Annotated[
        bool,
        Query(
            description="JSON only: each request's row too (`requests`), at most "
            f"{MAX_REPORT_REQUEST_ROWS:,} rows and {MAX_REPORT_REQUEST_BYTES // 2**20} MiB "
            "of them; `requests_truncated` says when rows were left out, and "
            "`/v1/runs/{run_id}/records` has every row.",
        ),
    ] = False,
    accept: Annotated[str | None, Header()] = None,
) -> Response:
    """The run's report as JSON, markdown or HTML, by ``?format=`` or ``Accept`` (the
    same content as `tokenbench report --format ...`), with a comparison if asked, and
    with its per-request rows if asked (JSON)."""
    fmt = report_format(output, accept)
    if compare is not None and providers is not None:
        raise BadInput("give compare or providers, not both")
    if requests and fmt.name != "json":
        raise BadInput(f"requests=true needs the json format, not {fmt.name}")
    # The run and its baseline: each one the caller may read, or 404 (docs/teams.md).
    check_read(writer, caller, Kind.RUN, run_id)
    if compare is not None:
        check_read(writer, caller, Kind.RUN, compare)
    return await heavy.on_cursor(
        "a run's report", writer, _report, run_id, fmt, compare, providers, requests, caller
    )


OTHER_TEAMS_RUN = "(a run of another team)"


def _hide_unreadable(
    cursor: duckdb.DuckDBPyConnection, report: RunReport, caller: Caller
) -> RunReport:
    """The report with the runs that overlapped its shared endpoints named only when the
    caller may read them (their existence and time are still said: that is what the
    caller needs to know about its own figures)."""
    readable = _readable_by(cursor, caller)
    overlaps = [
        row if readable(str(row["run_id"])) else {**row, "run_id": OTHER_TEAMS_RUN}
        for row in report.shared_overlaps
    ]
    return dataclasses.replace(report, shared_overlaps=overlaps)


def run_report(
    cursor: duckdb.DuckDBPyConnection,
    run_id: str,
    compare: str | None,
    providers: str | None,
    caller: Caller,
) -> RunReport:
    """The run's report as ``caller`` sees it, with a comparison to the ``compare`` run
    or between two ``providers`` (A,B) if asked (the REST report and the web console;
    the caller's read of both runs is checked by the route)."""
    report = _hide_unreadable(cursor, build_report(cursor, run_id), caller)
    if providers is not None:
        report = report.with_provider_comparison(*_provider_pair(providers))
    if compare is not None:
        baseline = _hide_unreadable(cursor, build_report(cursor, compare), caller)
        report = report.with_run_comparison(baseline)
    return report


def _report(
    cursor: duckdb.DuckDBPyConnection,
    run_id: str,
    fmt: ReportFormat,
    compare: str | None,
    providers: str | None,
    requests: bool,
    caller: Caller,
) -> Response:
    """The report's answer, built and rendered in a heavy-work thread."""
    report = run_report(cursor, run_id, compare, providers, caller)
    headers = {"x-content-type-options": "nosniff", "vary": "Accept"}
    headers.update(REPORT_HEADERS.get(fmt.name, {}))
    if requests:
        return _report_with_requests(cursor, report, headers)
    return Response(fmt.render(report), media_type=fmt.media_type, headers=headers)


def _report_with_requests(
    cursor: duckdb.DuckDBPyConnection, report: RunReport, headers: dict[str, str]
) -> Response:
    # Held in memory, so capped in rows and bytes (docs/security.md, Bounds): one request
    # holds at most MAX_REPORT_REQUEST_BYTES of rows, whatever the run's size.
    parts: list[str] = []
    written = write_report_with_requests(
        report,
        request_batches(cursor, report.run_id),
        parts.append,
        max_rows=MAX_REPORT_REQUEST_ROWS,
        max_bytes=MAX_REPORT_REQUEST_BYTES,
        cut_note=f"GET /v1/runs/{report.run_id}/records (Arrow or Parquet) or "
        "`tokenbench report --format json --requests` has every row",
    )
    headers = {**headers, "x-tokenbench-truncated": "true" if written.truncated else "false"}
    return Response("".join(parts), media_type="application/json", headers=headers)


@router.get(
    "/{run_id}/records",
    responses={200: {"content": {ARROW_STREAM: {}, PARQUET: {}}}},
    response_class=StreamingResponse,
)
def get_records(
    run_id: str,
    cursor: CursorDep,
    writer: WriterDep,
    caller: CallerDep,
    output: Annotated[str | None, Query(alias="format", pattern="^(arrow|parquet)$")] = None,
    accept: Annotated[str | None, Header()] = None,
) -> StreamingResponse:
    """The run's request records (accepted attempts) as an Arrow IPC stream or Parquet,
    streamed: encoded batch by batch as DuckDB reads them (analytics/query/record_export.py)."""
    check_read(cursor, caller, Kind.RUN, run_id)
    if not run_exists(cursor, run_id):
        raise UnknownRunError(run_id)
    wants_parquet = output == "parquet" or (output is None and PARQUET in (accept or ""))
    # A cursor of the answer's own: it lives as long as the stream, past this function
    # (the dependency's cursor is closed when the route returns).
    reading = writer.cursor()
    try:
        reader = record_reader(reading, run_id)
    except BaseException:
        reading.close()
        raise
    encode = parquet_stream if wants_parquet else arrow_stream
    return StreamingResponse(
        _closing(encode(reader), reader, reading),
        media_type=PARQUET if wants_parquet else ARROW_STREAM,
    )


def run_exists(con: duckdb.DuckDBPyConnection, run_id: str) -> bool:
    """Whether ``run_id`` is a stored run (or shadow session)."""
    return bool(con.execute("SELECT 1 FROM runs WHERE run_id = ?", [run_id]).fetchall())


def _closing(
    pieces: Iterator[bytes], reader: pa.RecordBatchReader, cursor: duckdb.DuckDBPyConnection
) -> Iterator[bytes]:
    """``pieces``, then the reader and its cursor closed (also when the client went
    away and the stream is dropped unfinished)."""
    try:
        yield from pieces
    finally:
        reader.close()
        cursor.close()
