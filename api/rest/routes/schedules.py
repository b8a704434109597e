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

from api.access.audit import audit
from api.access.caller import Caller
from api.access.ownership import (
    Kind,
    check_change,
    check_read,
    owner_of,
    record_owner,
    visible_sql,
)
from api.access.quotas import check_schedules
from api.access.teams import TeamStore
from api.rest.deps import (
    Authenticated,
    CallerDep,
    HeavyDep,
    RunStarterDep,
    ScheduleServiceDep,
    SettingsDep,
    SubmitterDep,
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
from scenarios.errors import Conflict, TokenbenchError
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
    caller: SubmitterDep,
) -> SchedulePublic:
    """Store a schedule; it fires from the next time its expression names, as the
    caller's team. It may only name a scenario the caller may read (404 otherwise);
    429 past the team's max_schedules."""
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
        RunCreate(scenario_id=body.scenario_id, overrides=body.overrides), caller
    )
    if service.store.count_live() >= MAX_SCHEDULES:
        raise Conflict(f"at most {MAX_SCHEDULES} schedules: delete one first")
    check_schedules(service.con, TeamStore(service.con, settings.teams).policy(caller.team))
    schedule = service.add(body)
    record_owner(service.con, Kind.SCHEDULE, schedule.schedule_id, caller)
    audit(
        service.con, caller, "schedule.create", "schedule", schedule.schedule_id, "ok",
        scenario_id=body.scenario_id, cron=body.cron,
    )  # fmt: skip
    return public(service, schedule)


@router.get("", response_model=list[SchedulePublic])
async def list_schedules(service: ScheduleServiceDep, caller: CallerDep) -> list[SchedulePublic]:
    """Active and paused schedules the caller may read, oldest first."""
    where = visible_sql(Kind.SCHEDULE, caller, "schedules.schedule_id")
    return [public(service, s) for s in service.store.live(where)]


@router.get("/{schedule_id}", response_model=SchedulePublic)
async def get_schedule(
    schedule_id: str, service: ScheduleServiceDep, caller: CallerDep
) -> SchedulePublic:
    """One schedule: its next fire, its last fire and its last webhook notification."""
    check_read(service.con, caller, Kind.SCHEDULE, schedule_id)
    return public(service, service.store.get(schedule_id))


def _changing(service: ScheduleService, caller: Caller, schedule_id: str, action: str) -> None:
    """404 for an unknown schedule or one the caller may not read, 403 for another
    team's (or a viewer); the refusal is audited."""
    try:
        check_read(service.con, caller, Kind.SCHEDULE, schedule_id)
        service.store.get(schedule_id)
        check_change(service.con, caller, Kind.SCHEDULE, schedule_id)
    except TokenbenchError as exc:
        audit(
            service.con, caller, action, "schedule", schedule_id, "refused",
            error=type(exc).__name__,
        )  # fmt: skip
        raise


@router.delete("/{schedule_id}", status_code=204)
async def delete_schedule(
    schedule_id: str, service: ScheduleServiceDep, caller: SubmitterDep
) -> Response:
    """Stop the schedule for good (its runs and fires stay on record, and in trends)."""
    _changing(service, caller, schedule_id, "schedule.delete")
    service.delete(schedule_id)
    audit(service.con, caller, "schedule.delete", "schedule", schedule_id, "ok")
    return Response(status_code=204)


@router.post("/{schedule_id}/pause", response_model=SchedulePublic)
async def pause_schedule(
    schedule_id: str, service: ScheduleServiceDep, caller: SubmitterDep
) -> SchedulePublic:
    """Stop firing until resumed (a run under way goes on)."""
    _changing(service, caller, schedule_id, "schedule.pause")
    answer = public(service, service.pause(schedule_id))
    audit(service.con, caller, "schedule.pause", "schedule", schedule_id, "ok")
    return answer


@router.post("/{schedule_id}/resume", response_model=SchedulePublic)
async def resume_schedule(
    schedule_id: str, service: ScheduleServiceDep, settings: SettingsDep, caller: SubmitterDep
) -> SchedulePublic:
    """Fire again, from the next time the expression names (nothing is caught up; 429
    past its team's max_schedules)."""
    _changing(service, caller, schedule_id, "schedule.resume")
    if service.store.get(schedule_id).state != ScheduleState.ACTIVE:
        # The schedule's own team's quota (an admin may resume another team's).
        team = owner_of(service.con, Kind.SCHEDULE, schedule_id).team
        check_schedules(service.con, TeamStore(service.con, settings.teams).policy(team))
    answer = public(service, service.resume(schedule_id))
    audit(service.con, caller, "schedule.resume", "schedule", schedule_id, "ok")
    return answer


@router.get("/{schedule_id}/runs", response_model=list[FirePublic])
async def schedule_runs(
    schedule_id: str,
    service: ScheduleServiceDep,
    caller: CallerDep,
    limit: Annotated[int, Query(ge=1, le=MAX_SCHEDULE_FIRES_KEPT)] = 100,
) -> list[FirePublic]:
    """The schedule's fires, newest first: the run each started (and its state), or
    why it did not start one (skipped, failed), and what its trend flagged."""
    check_read(service.con, caller, Kind.SCHEDULE, schedule_id)
    service.store.get(schedule_id, deleted=True)
    return [FirePublic(**fire) for fire in service.store.fires(schedule_id, limit)]
