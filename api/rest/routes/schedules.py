"""``/v1/schedules``: run a stored scenario on a cron expression, follow its fires.

A schedule is checked when it is accepted as its fires will be: the cron expression
and time zone (422 at ``cron`` / ``timezone``: unreadable, never firing, or firing more
often than the minimum interval), the webhook URL (422 at ``webhook_url`` when the
egress policy refuses it), and the stored scenario with the overrides, validated as
``POST /v1/runs`` would (404 for an unknown scenario, 422 at the scenario's fields).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from api.access.ownership import Kind, owner_of
from api.access.quotas import check_schedules
from api.access.teams import TeamStore
from api.rest.deps import (
    Authenticated,
    CallerDep,
    HeavyDep,
    RunStarterDep,
    ScheduleServiceDep,
    SettingsDep,
)
from api.rest.errors import BodyProblems
from api.schedules.cron import CronError, check_interval, parse_cron
from api.schedules.service import ScheduleService
from api.schedules.store import ScheduleState, StoredSchedule, now
from api.schedules.webhook import check_webhook_url
from api.schemas import (
    FirePublic,
    RunCreate,
    ScheduleCreate,
    SchedulePublic,
    WebhookDeliveryPublic,
)
from scenarios.errors import Conflict
from scenarios.limits import MAX_SCHEDULE_FIRES_KEPT, MAX_SCHEDULES
from scenarios.security.egress import EgressDenied
from scenarios.security.redaction import public_url

router = APIRouter(prefix="/v1/schedules", tags=["schedules"], dependencies=[Authenticated])


def public(service: ScheduleService, schedule: StoredSchedule) -> SchedulePublic:
    """The schedule as the API shows it: with its next fire, last fire and last webhook."""
    fires = service.store.fires(schedule.schedule_id, limit=1)
    webhook = service.store.last_webhook(schedule.schedule_id)
    return SchedulePublic(
        id=schedule.schedule_id,
        name=schedule.name,
        scenario_id=schedule.scenario_id,
        cron=schedule.cron,
        timezone=schedule.timezone,
        overrides=schedule.overrides,
        wait_for_workers=schedule.wait_for_workers,
        # Its credentials (user:password, query, a hook's secret path) stay stored for
        # delivery and are never shown: only where it goes.
        webhook_url=None if schedule.webhook_url is None else public_url(schedule.webhook_url),
        trend_window=schedule.trend_window,
        min_change=schedule.min_change,
        state=schedule.state,
        created_at=schedule.created_at,
        next_fire_at=service.next_fire_at(schedule.schedule_id),
        last_fire=FirePublic(**fires[0]) if fires else None,
        last_webhook=None if webhook is None else WebhookDeliveryPublic(**webhook),
    )


def _check_cron(cron: str, timezone: str, min_interval_s: float) -> None:
    check_interval(parse_cron(cron, timezone), min_interval_s, now())


@router.post("", status_code=201, response_model=SchedulePublic)
async def create_schedule(
    body: ScheduleCreate,
    service: ScheduleServiceDep,
    starter: RunStarterDep,
    settings: SettingsDep,
    heavy: HeavyDep,
    caller: CallerDep,
) -> SchedulePublic:
    """Store a schedule; it fires from the next time its expression names (429 past the
    team's max_schedules)."""
    try:
        # Off the event loop: the interval check walks up to a day of fires.
        await heavy.run(
            "a cron expression's check",
            _check_cron,
            body.cron,
            body.timezone,
            settings.schedules.min_interval_s,
        )
    except CronError as exc:
        raise BodyProblems([{"loc": ["body", exc.field], "msg": str(exc)}]) from None
    if body.webhook_url is not None:
        try:
            check_webhook_url(body.webhook_url, settings.egress)
        except EgressDenied as exc:
            raise BodyProblems([{"loc": ["body", "webhook_url"], "msg": str(exc)}]) from None
    await starter.checked_scenario(
        RunCreate(scenario_id=body.scenario_id, overrides=body.overrides)
    )
    if service.store.count_live() >= MAX_SCHEDULES:
        raise Conflict(f"at most {MAX_SCHEDULES} schedules: delete one first")
    check_schedules(service.con, TeamStore(service.con, settings.teams).policy(caller.team))
    return public(service, service.add(body))


@router.get("", response_model=list[SchedulePublic])
async def list_schedules(service: ScheduleServiceDep) -> list[SchedulePublic]:
    """Active and paused schedules, oldest first."""
    return [public(service, s) for s in service.store.live()]


@router.get("/{schedule_id}", response_model=SchedulePublic)
async def get_schedule(schedule_id: str, service: ScheduleServiceDep) -> SchedulePublic:
    """One schedule: its next fire, its last fire and its last webhook notification."""
    return public(service, service.store.get(schedule_id))


@router.delete("/{schedule_id}", status_code=204)
async def delete_schedule(schedule_id: str, service: ScheduleServiceDep) -> Response:
    """Stop the schedule for good (its runs and fires stay on record, and in trends)."""
    service.delete(schedule_id)
    return Response(status_code=204)


@router.post("/{schedule_id}/pause", response_model=SchedulePublic)
async def pause_schedule(schedule_id: str, service: ScheduleServiceDep) -> SchedulePublic:
    """Stop firing until resumed (a run under way goes on)."""
    return public(service, service.pause(schedule_id))


@router.post("/{schedule_id}/resume", response_model=SchedulePublic)
async def resume_schedule(
    schedule_id: str, service: ScheduleServiceDep, settings: SettingsDep, caller: CallerDep
) -> SchedulePublic:
    """Fire again, from the next time the expression names (nothing is caught up; 429
    past its team's max_schedules)."""
    if service.store.get(schedule_id).state != ScheduleState.ACTIVE:
        # The schedule's own team's quota (an admin may resume another team's).
        team = owner_of(service.con, Kind.SCHEDULE, schedule_id).team
        check_schedules(service.con, TeamStore(service.con, settings.teams).policy(team))
    return public(service, service.resume(schedule_id))


@router.get("/{schedule_id}/runs", response_model=list[FirePublic])
async def schedule_runs(
    schedule_id: str,
    service: ScheduleServiceDep,
    limit: Annotated[int, Query(ge=1, le=MAX_SCHEDULE_FIRES_KEPT)] = 100,
) -> list[FirePublic]:
    """The schedule's fires, newest first: the run each started (and its state), or
    why it did not start one (skipped, failed), and what its trend flagged."""
    service.store.get(schedule_id, deleted=True)
    return [FirePublic(**fire) for fire in service.store.fires(schedule_id, limit)]
