"""``/v1/teams``: each team's effective settings, and an admin's changes to them.

A figure is the team's own (set with ``PATCH``) or the service's default (the
``teams`` settings, e.g. ``TOKENBENCH__TEAMS__MAX_SCHEDULES``); every answer says
which, per figure. ``null`` in a ``PATCH`` resets a figure to the default. Changes, and
refusals of them, are appended to the audit log (action ``team.update``). docs/teams.md
is the guide.

Who may call: ``GET /v1/teams`` any role (an admin sees every team, anyone else their
own); ``GET /v1/teams/{team}`` an admin, or a member of that team (another team is a
404, as an unknown one); ``PATCH`` an admin.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path
from pydantic import BaseModel, ConfigDict, Field

from api.access.audit import audit
from api.access.caller import DEFAULT_TEAM, Caller
from api.access.inputs import MAX_TEAM_CHARS, MAX_TEAMS, TEAM_PATTERN
from api.access.teams import SETTABLE, TeamPolicy, TeamStore
from api.rest.deps import Authenticated, CallerDep, CursorDep, SettingsDep, WriterDep
from api.rest.routes.tokens import admin_or_refuse
from scenarios.errors import BadInput, Conflict, NotFound
from scenarios.settings import env_name

router = APIRouter(prefix="/v1/teams", tags=["teams"], dependencies=[Authenticated])

TeamName = Annotated[str, Path(pattern=TEAM_PATTERN, max_length=MAX_TEAM_CHARS)]
# Bounds of what an admin sets (the defaults' own bounds where they have one).
MAX_BUDGET_USD = 1_000_000_000.0
MAX_TEAM_DATASET_BYTES = 10**15


class TeamUpdate(BaseModel):
    """Figures to set for a team; a field given as ``null`` is reset to the default, a
    field left out is unchanged."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    visibility: Literal["org", "team"] | None = Field(
        default=None, description="Who reads the team's results: the organisation, or the team."
    )
    monthly_budget_usd: float | None = Field(
        default=None, ge=0, le=MAX_BUDGET_USD, description="Spend per calendar month (UTC)."
    )
    max_concurrent_runs: int | None = Field(default=None, ge=1, le=1000)
    max_queued_runs: int | None = Field(default=None, ge=0, le=10_000)
    max_schedules: int | None = Field(default=None, ge=0, le=10_000)
    max_dataset_bytes: int | None = Field(default=None, ge=0, le=MAX_TEAM_DATASET_BYTES)


class TeamFigure(BaseModel):
    """One effective figure and where it comes from."""

    value: Any = Field(description="The figure in force (null budget: unlimited).")
    source: Literal["team", "default"] = Field(
        description="team: set for this team; default: the service-wide setting."
    )
    default_setting: str = Field(description="The environment variable of the default.")


class TeamPublic(BaseModel):
    """A team and its effective settings."""

    team: str
    settings: dict[str, TeamFigure]


def team_public(policy: TeamPolicy) -> TeamPublic:
    """Each settable figure of ``policy``, with its source."""
    figures = {}
    for name in SETTABLE:
        value = getattr(policy, name)
        figures[name] = TeamFigure(
            value=_plain(value),
            source="team" if name in policy.own else "default",
            default_setting=env_name(f"teams.{name}"),
        )
    return TeamPublic(team=policy.team, settings=figures)


def _plain(value: Any) -> Any:
    """A figure as JSON holds it (a visibility as its word)."""
    return getattr(value, "value", value)


def known_teams(store: TeamStore) -> list[str]:
    """Every team: with a token, a setting or an object, and ``default`` always (the
    bootstrap tokens' team)."""
    return sorted({DEFAULT_TEAM, *store.teams()})


def _readable(store: TeamStore, caller: Caller, team: str) -> None:
    """404 unless the team exists and the caller may read it (an admin, or a member)."""
    if caller.team == team:
        return
    if not caller.is_admin or team not in known_teams(store):
        raise NotFound(f"no team {team}")


@router.get("", response_model=list[TeamPublic])
def list_teams(caller: CallerDep, con: CursorDep, settings: SettingsDep) -> list[TeamPublic]:
    """Every team with its effective settings (an admin), or the caller's own team."""
    store = TeamStore(con, settings.teams)
    teams = known_teams(store) if caller.is_admin else [caller.team]
    return [team_public(store.policy(team)) for team in teams]


@router.get("/{team}", response_model=TeamPublic)
def get_team(
    team: TeamName, caller: CallerDep, con: CursorDep, settings: SettingsDep
) -> TeamPublic:
    """One team's effective settings (an admin, or a member of the team)."""
    store = TeamStore(con, settings.teams)
    _readable(store, caller, team)
    return team_public(store.policy(team))


@router.patch("/{team}", response_model=TeamPublic)
async def update_team(
    team: TeamName, body: TeamUpdate, caller: CallerDep, con: WriterDep, settings: SettingsDep
) -> TeamPublic:
    """Set or reset some of a team's figures (admin); a team not seen before is created."""
    admin_or_refuse(con, caller, "team.update", "team", team)
    changes = {name: getattr(body, name) for name in body.model_fields_set}
    if not changes:
        raise BadInput(f"nothing to change: give one or more of {', '.join(SETTABLE)}")
    store = TeamStore(con, settings.teams)
    teams = known_teams(store)
    if team not in teams and len(teams) >= MAX_TEAMS:
        audit(con, caller, "team.update", "team", team, "refused", reason="too many teams")
        raise Conflict(f"at most {MAX_TEAMS} teams")
    before = store.policy(team)
    policy = store.update(team, changes)
    audit(
        con,
        caller,
        "team.update",
        "team",
        team,
        changes=changes,
        before={name: _plain(getattr(before, name)) for name in changes},
    )
    return team_public(policy)
