"""``/v1/spend``: the spend ledger, what teams spent per provider, day or run
(docs/teams.md, "Budgets and the spend ledger")."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

from fastapi import APIRouter, Query

from api.access.teams import TeamStore
from api.control.spend import ledger_rows, month_start, team_budget
from api.rest.deps import Authenticated, CallerDep, CursorDep, SettingsDep
from scenarios.errors import BadInput, Refused
from scenarios.limits import MAX_ID_CHARS

router = APIRouter(prefix="/v1/spend", tags=["spend"], dependencies=[Authenticated])

# Longest span one ledger read covers: a few years of days.
MAX_SPEND_DAYS = 3 * 366


@router.get("")
def get_spend(
    caller: CallerDep,
    cursor: CursorDep,
    settings: SettingsDep,
    team: Annotated[
        str | None,
        Query(max_length=MAX_ID_CHARS, description="Team (default: the caller's; admins: any)."),
    ] = None,
    since: Annotated[
        dt.date | None, Query(description="First UTC day (default: this month's first).")
    ] = None,
    until: Annotated[dt.date | None, Query(description="Last UTC day (default: today).")] = None,
    group: Annotated[
        Literal["provider", "day", "run"], Query(description="Sum per provider, day or run.")
    ] = "provider",
) -> dict[str, object]:
    """What a team spent from ``since`` to ``until`` on token-priced providers, from its
    runs' recorded usage × list price, and its monthly budget left. A team's own tokens
    read it; an admin reads any team's (403 otherwise)."""
    chosen = team or caller.team
    if chosen != caller.team and not caller.is_admin:
        raise Refused(f"team {chosen}'s spend is read by its own tokens or an admin")
    first = since or month_start()
    last = until or dt.datetime.now(dt.UTC).date()
    if last < first:
        raise BadInput("until is before since")
    if (last - first).days > MAX_SPEND_DAYS:
        raise BadInput(f"since..until spans more than {MAX_SPEND_DAYS} days")
    rows = ledger_rows(cursor, chosen, first, last, group)
    budget = team_budget(cursor, TeamStore(cursor, settings.teams).policy(chosen))
    return {
        "team": chosen,
        "since": first.isoformat(),
        "until": last.isoformat(),
        "group": group,
        "rows": rows,
        "total_usd": sum(float(str(r["usd"])) for r in rows),
        "budget": budget.to_json(),
    }
