"""Teams and their settings: visibility of results, monthly budget, quotas.

A team exists once a token names it; its row in ``teams`` holds what an admin set for
it, and every figure it does not set is the service's default (the ``teams`` settings,
:class:`scenarios.settings.TeamSettings`). :meth:`TeamStore.policy` is the one place that
merges the two.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import duckdb

from analytics.sql.results import first_row
from api.access.ownership import Visibility
from scenarios.settings import TeamSettings, env_name

# The columns an admin may set, in ``teams``; NULL means the default.
SETTABLE = (
    "visibility",
    "monthly_budget_usd",
    "max_concurrent_runs",
    "max_queued_runs",
    "max_schedules",
    "max_dataset_bytes",
)


@dataclass(frozen=True, slots=True)
class TeamPolicy:
    """A team's effective settings; ``own`` names those set for it, not defaulted."""

    team: str
    visibility: Visibility
    monthly_budget_usd: float | None
    max_concurrent_runs: int
    max_queued_runs: int
    max_schedules: int
    max_dataset_bytes: int
    own: frozenset[str]

    def setting(self, name: str) -> str:
        """Where a figure comes from, for messages: the team's own or the default's
        environment variable."""
        if name in self.own:
            return f"team {self.team}'s {name} (tokenbench teams set)"
        return env_name(f"teams.{name}")


class TeamStore:
    """Reads and writes ``teams`` on ``con`` (the caller's connection or cursor)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, defaults: TeamSettings) -> None:
        self.con = con
        self.defaults = defaults

    def policy(self, team: str) -> TeamPolicy:
        """The team's effective settings."""
        row = first_row(
            self.con.execute(
                f"SELECT {', '.join(SETTABLE)} FROM teams WHERE team = ?",  # noqa: S608
                [team],
            )
        )
        own = dict(zip(SETTABLE, row, strict=True)) if row else {}
        set_here = frozenset(k for k, v in own.items() if v is not None)
        default = self.defaults.model_dump()

        def value(name: str) -> Any:
            return own[name] if name in set_here else default[name]

        budget = value("monthly_budget_usd")
        return TeamPolicy(
            team=team,
            visibility=Visibility(value("visibility")),
            monthly_budget_usd=None if budget is None else float(budget),
            max_concurrent_runs=int(value("max_concurrent_runs")),
            max_queued_runs=int(value("max_queued_runs")),
            max_schedules=int(value("max_schedules")),
            max_dataset_bytes=int(value("max_dataset_bytes")),
            own=set_here,
        )

    def update(self, team: str, changes: dict[str, Any]) -> TeamPolicy:
        """Set (or, with None, reset to the default) some of a team's figures."""
        unknown = set(changes) - set(SETTABLE)
        if unknown:
            raise ValueError(f"not team settings: {sorted(unknown)}")
        now = dt.datetime.now(dt.UTC)
        self.con.execute(
            "INSERT INTO teams (team, created_at, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            [team, now, now],
        )
        for name, given in changes.items():
            # visibility is NOT NULL: a reset writes the default explicitly.
            value = self.defaults.visibility if name == "visibility" and given is None else given
            self.con.execute(
                f"UPDATE teams SET {name} = ?, updated_at = ? WHERE team = ?",  # noqa: S608
                [value.value if isinstance(value, Visibility) else value, now, team],
            )
        return self.policy(team)

    def teams(self) -> list[str]:
        """Every team with a token, a setting or an object."""
        rows = self.con.execute(
            "SELECT team FROM teams UNION SELECT team FROM api_tokens "
            "UNION SELECT team FROM object_owners ORDER BY 1"
        ).fetchall()
        return [str(r[0]) for r in rows]
