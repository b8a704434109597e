"""The console's other pages: schedules (pause, resume, trend), datasets, shadow
sessions, capacity answers and sweeps, and the service's health, each from the REST
routes' own functions."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse
from prometheus_client.core import Metric

from analytics.trends.build import DEFAULT_TREND_RUNS
from api.access.caller import Role
from api.console.auth import ConsoleDep, checked_form, need
from api.console.pages import render, secured
from api.console.reads import App, decoded
from api.rest.routes import answers as rest_answers
from api.rest.routes import datasets as rest_datasets
from api.rest.routes import health as rest_health
from api.rest.routes import schedules as rest_schedules
from api.rest.routes import shadow as rest_shadow
from api.rest.routes import trends as rest_trends
from scenarios.errors import TokenbenchError

router = APIRouter(include_in_schema=False)
FIRES_SHOWN = 20
ANSWERS_SHOWN = 200


@router.get("/schedules")
async def schedules_page(request: Request, console: ConsoleDep) -> Response:
    """The schedules the caller may read."""
    app = App.of(request)
    listed = await rest_schedules.list_schedules(app.schedules, console.caller)
    return render(request, "schedules.html", schedules=[s.model_dump() for s in listed])


@router.get("/schedules/{schedule_id}")
async def schedule_page(request: Request, console: ConsoleDep, schedule_id: str) -> Response:
    """A schedule: its state, its fires, its trend and regression verdicts."""
    app = App.of(request)
    schedule = await rest_schedules.get_schedule(schedule_id, app.schedules, console.caller)
    fires = await rest_schedules.schedule_runs(
        schedule_id, app.schedules, console.caller, FIRES_SHOWN
    )
    trend: dict[str, Any] | None = None
    try:
        answer = await rest_trends.get_trend(
            app.writer, app.heavy, console.caller, schedule_id=schedule_id,
            runs=DEFAULT_TREND_RUNS, output="json",
        )  # fmt: skip
        trend = decoded(answer)
    except TokenbenchError:
        trend = None  # no run yet: the page says so
    may_change = console.caller.has(Role.SUBMITTER)
    return render(
        request, "schedule.html", schedule=schedule.model_dump(),
        fires=[f.model_dump() for f in fires], trend=trend, chart=_chart(trend),
        may_change=may_change,
    )  # fmt: skip


def _chart(trend: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Polylines of TTFT p50 per series over the runs, as SVG points (0..100 by 0..40):
    drawn by the template, no script needed."""
    if not trend:
        return []
    series: dict[str, list[float]] = {}
    for point in trend.get("points", []):
        value = point.get("value")
        if point.get("metric") != "ttft_p50_ms" or value is None:
            continue
        key = " / ".join(str(point.get(k, "")) for k in ("provider", "region", "stage"))
        series.setdefault(key, []).append(float(value))
    top = max((v for values in series.values() for v in values), default=0.0)
    lines = []
    for name, values in series.items():
        if top <= 0:
            continue
        step = 100 / max(1, len(values) - 1)
        points = " ".join(f"{i * step:.1f},{40 - 38 * v / top:.1f}" for i, v in enumerate(values))
        lines.append({"name": name, "points": points, "last": values[-1], "top": top})
    return lines


async def _schedule_action(request: Request, console: Any, schedule_id: str, pause: bool) -> None:
    await checked_form(request, console)
    need(console.caller, Role.SUBMITTER)
    app = App.of(request)
    if pause:
        await rest_schedules.pause_schedule(schedule_id, app.schedules, console.caller)
    else:
        await rest_schedules.resume_schedule(
            schedule_id, app.schedules, app.settings, console.caller
        )


@router.post("/schedules/{schedule_id}/pause")
async def pause(request: Request, console: ConsoleDep, schedule_id: str) -> Response:
    """Pause a schedule (POST /v1/schedules/{id}/pause's own function)."""
    await _schedule_action(request, console, schedule_id, pause=True)
    return secured(RedirectResponse(f"/schedules/{schedule_id}", status_code=303))


@router.post("/schedules/{schedule_id}/resume")
async def resume(request: Request, console: ConsoleDep, schedule_id: str) -> Response:
    """Resume a schedule (POST /v1/schedules/{id}/resume's own function)."""
    await _schedule_action(request, console, schedule_id, pause=False)
    return secured(RedirectResponse(f"/schedules/{schedule_id}", status_code=303))


@router.get("/datasets")
async def datasets_page(request: Request, console: ConsoleDep) -> Response:
    """The datasets the caller may read."""
    cursor = App.of(request).writer.cursor()
    try:
        # A sync route of REST runs in the thread pool with its cursor: here too.
        listed = await asyncio.to_thread(rest_datasets.list_datasets, cursor, console.caller)
    finally:
        cursor.close()
    return render(request, "datasets.html", datasets=[d.model_dump() for d in listed])


@router.get("/datasets/{dataset_id}")
async def dataset_page(request: Request, console: ConsoleDep, dataset_id: str) -> Response:
    """One dataset's metadata."""
    cursor = App.of(request).writer.cursor()
    try:
        info = await asyncio.to_thread(
            rest_datasets.get_dataset, dataset_id, cursor, console.caller
        )
    finally:
        cursor.close()
    return render(request, "dataset.html", dataset=info.model_dump())


@router.get("/shadow")
async def shadow_page(request: Request, console: ConsoleDep) -> Response:
    """The shadow sessions the caller may read."""
    app = App.of(request)
    listed = await rest_shadow.list_sessions(app.writer, app.heavy, console.caller, 100)
    return render(request, "shadow.html", sessions=listed)


@router.get("/shadow/{session_id}")
async def shadow_session_page(request: Request, console: ConsoleDep, session_id: str) -> Response:
    """One shadow session: its summary and its comparison."""
    app = App.of(request)
    summary = await rest_shadow.get_session(session_id, app.writer, app.heavy, console.caller)
    comparison = await rest_shadow.get_comparison(session_id, app.writer, app.heavy, console.caller)
    return render(request, "shadow_session.html", session=summary, comparison=comparison)


def _samples(families: list[Metric]) -> dict[str, list[tuple[dict[str, str], float]]]:
    return {
        family.name: [(dict(s.labels), float(s.value)) for s in family.samples]
        for family in families
    }


@router.get("/health")
async def health_page(request: Request, console: ConsoleDep) -> Response:
    """Redis, DuckDB and live workers per region (what /readyz says), runs by state,
    shards in flight per region and stream backlog (what /metrics says), and the queue."""
    app = App.of(request)
    ready = decoded(await rest_health.readyz(app.redis, app.writer, app.settings))
    metrics = _samples(await rest_health.collect(app.plane, app.writer))
    queue = app.plane.queue
    queued = [] if queue is None else [entry.run_id for entry in queue.entries]
    return render(request, "health.html", ready=ready, metrics=metrics, queued=queued)


@router.get("/answers")
async def answers_page(request: Request, console: ConsoleDep) -> Response:
    """Capacity answers and load sweeps of the runs the caller may read (GET /v1/answers's
    own function); each links to its run, whose report has the full answer."""
    cursor = App.of(request).writer.cursor()
    try:
        listed = await asyncio.to_thread(
            rest_answers.list_answers, cursor, console.caller, ANSWERS_SHOWN
        )
    finally:
        cursor.close()
    return render(request, "answers.html", capacity=listed["capacity"], sweeps=listed["sweeps"])
