"""Budgets: refusing a run whose cost bound is above what is left, and stopping a run
whose recorded spend reaches its team's monthly budget or its own cap.

What a run spent is computed from its records, never estimated: per provider and UTC
day (of the request's send), the tokens the server reported (``prompt_tokens``,
``completion_tokens``; an answered request without a prompt count: its planned prompt)
× the run's list prices (the ``providers`` table, copied from the scenario when the
run was created), for token-priced providers only. Every attempt's records count: a
re-sent shard's requests were paid for too. The rows are upserted into
``spend_ledger`` (team, provider, day, run), so the ledger is always the SQL sum of the
records × price; the control loop does it at most every ``SPEND_CHECK_S`` per run and
once more when the run closes (docs/teams.md, "Budgets and the spend ledger").
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import duckdb

from analytics.sql.results import first_row
from api.access.caller import DEFAULT_TEAM
from api.access.teams import TeamPolicy, TeamStore
from api.control.cost_plan import CostPlan
from scenarios.errors import Refused
from scenarios.settings import TeamSettings
from scenarios.wire.contract import RunState

if TYPE_CHECKING:
    from api.control.coordinator import Coordinator

log = logging.getLogger("tokenbench.control")

# Seconds between two spend checks of one run: the ledger query scans the run's records.
SPEND_CHECK_S = 2.0
# Seconds a run stopped by its budget keeps storing what its workers still send.
BUDGET_DRAIN_S = 5.0
BUDGET_REASON = "budget"
RUN_CAP_SETTING = "the scenario's budget.max_cost_usd"

# One statement: the run's spend per provider and UTC day, upserted.
_LEDGER_SQL = """
INSERT OR REPLACE INTO spend_ledger
SELECT ?, r.provider,
       CAST(epoch_ms(epoch_ms(coalesce(r.sent_at, r.intended_start_at))) AS DATE) AS day,
       r.run_id,
       sum(billed_prompt_tokens(r.prompt_tokens, r.planned_prompt_tokens, r.status)),
       sum(coalesce(r.completion_tokens, 0)),
       sum(list_cost_usd(
           billed_prompt_tokens(r.prompt_tokens, r.planned_prompt_tokens, r.status),
           coalesce(r.completion_tokens, 0), p.input_per_mtok, p.output_per_mtok)),
       now()
FROM request_records AS r
JOIN providers AS p ON p.run_id = r.run_id AND p.provider = r.provider
WHERE r.run_id = ? AND p.input_per_mtok IS NOT NULL
  AND coalesce(r.sent_at, r.intended_start_at) IS NOT NULL
GROUP BY r.run_id, r.provider, day
"""


class OverBudget(Refused):
    """A submission whose cost bound is above what its team has left, or above its own
    cap (403: valid, but not allowed by policy; docs/decisions.md)."""

    def __init__(self, message: str, figures: Mapping[str, Any]) -> None:
        super().__init__(message)
        self.figures = dict(figures)

    def public_fields(self) -> dict[str, object]:
        """The figures beside the message: bound, budget, spent, left, setting."""
        return {"budget": self.figures}


@dataclass(frozen=True)
class TeamBudget:
    """A team's monthly budget (None: unlimited), its spend this UTC month and what is
    left (None: unlimited), and the setting the budget comes from."""

    team: str
    monthly_budget_usd: float | None
    spent_this_month_usd: float
    left_usd: float | None
    setting: str
    # What the team's runs still going (or queued) may yet spend: their bounds (or caps)
    # less what they spent, held back so two runs admitted together cannot both spend it.
    reserved_usd: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """As the dry run answers it."""
        return {
            "team": self.team,
            "monthly_budget_usd": self.monthly_budget_usd,
            "spent_this_month_usd": self.spent_this_month_usd,
            "reserved_usd": self.reserved_usd,
            "left_usd": self.left_usd,
            "setting": self.setting,
        }


def month_start(now: dt.datetime | None = None) -> dt.date:
    """The first day of the current UTC month."""
    today = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC).date()
    return today.replace(day=1)


def month_spend(con: duckdb.DuckDBPyConnection, team: str, now: dt.datetime | None = None) -> float:
    """USD ``team`` spent this UTC month, from the ledger."""
    row = first_row(
        con.execute(
            "SELECT coalesce(sum(usd), 0) FROM spend_ledger WHERE team = ? AND day >= ?",
            [team, month_start(now)],
        )
    )
    return float(row[0]) if row else 0.0


def reserved_spend(con: duckdb.DuckDBPyConnection, team: str) -> float:
    """USD the team's running and queued runs may still spend: each one's cost bound (or
    its cap when it has no bound) less its spend so far, never below zero."""
    row = first_row(
        con.execute(
            "SELECT coalesce(sum(greatest(coalesce(b.cost_bound_usd, b.max_cost_usd, 0) - "
            "coalesce((SELECT sum(l.usd) FROM spend_ledger AS l WHERE l.run_id = b.run_id), 0), "
            "0)), 0) FROM run_cost_bounds AS b JOIN runs AS r USING (run_id) "
            "WHERE b.team = ? AND r.state IN ('running', 'queued')",
            [team],
        )
    )
    return float(row[0]) if row else 0.0


def team_budget(con: duckdb.DuckDBPyConnection, policy: TeamPolicy) -> TeamBudget:
    """``policy``'s team's budget, spend this month, what its runs going may still spend
    and what is left for a new run."""
    spent = month_spend(con, policy.team)
    budget = policy.monthly_budget_usd
    reserved = 0.0 if budget is None else reserved_spend(con, policy.team)
    return TeamBudget(
        team=policy.team,
        monthly_budget_usd=budget,
        spent_this_month_usd=spent,
        left_usd=None if budget is None else max(0.0, budget - spent - reserved),
        setting=policy.setting("monthly_budget_usd"),
        reserved_usd=reserved,
    )


def check_budget(plan: CostPlan, budget: TeamBudget) -> None:
    """Refuse (OverBudget, 403) a run whose cost bound is above its own cap or above
    what its team has left this month. A run whose cost has no bound (a closed loop over
    a duration) is admitted only with a cap, which then is its bound (the control loop
    stops it there); a run without a token-priced provider is never refused."""
    if not plan.priced:
        return
    bound, cap = plan.cost_bound_usd, plan.max_cost_usd
    figures: dict[str, Any] = {"cost_bound_usd": bound, "max_cost_usd": cap, **budget.to_json()}
    if bound is not None and cap is not None and bound > cap:
        raise OverBudget(
            f"the run's cost bound ${bound:,.4f} is above its cap ${cap:,.4f}: refused by "
            f"{RUN_CAP_SETTING} (tokenbench submit --dry-run shows the plan)",
            {**figures, "refused_by": RUN_CAP_SETTING},
        )
    if budget.left_usd is None:
        return
    charged = bound if bound is not None else cap
    said = (
        f"team {budget.team} has ${budget.left_usd:,.4f} left of its monthly budget "
        f"${budget.monthly_budget_usd or 0:,.4f} (spent ${budget.spent_this_month_usd:,.4f} "
        f"this month, ${budget.reserved_usd:,.4f} held for its runs going)"
    )
    if charged is None:
        why = "; ".join(plan.unbounded)
        raise OverBudget(
            f"the run's cost has no upper bound ({why}) and {said}: refused by "
            f"{budget.setting}; or cap the run with budget.max_cost_usd",
            {**figures, "refused_by": budget.setting},
        )
    if charged > budget.left_usd:
        what = "cost bound" if bound is not None else "cap (budget.max_cost_usd)"
        raise OverBudget(
            f"the run's {what} ${charged:,.4f} is above what it may spend: {said}; "
            f"refused by {budget.setting} (tokenbench submit --dry-run shows the plan)",
            {**figures, "refused_by": budget.setting},
        )


def record_bound(
    con: duckdb.DuckDBPyConnection, run_id: str, team: str, plan: CostPlan | None
) -> None:
    """Keep the run's team, cost bound and cap (``run_cost_bounds``), for the report and
    the control loop's checks."""
    con.execute(
        "INSERT OR REPLACE INTO run_cost_bounds (run_id, team, cost_bound_usd, max_cost_usd, "
        "plan, created_at) VALUES (?, ?, ?, ?, ?, now())",
        [
            run_id,
            team,
            None if plan is None else plan.cost_bound_usd,
            None if plan is None else plan.max_cost_usd,
            None if plan is None else json.dumps(plan.to_json()),
        ],
    )


def run_team(con: duckdb.DuckDBPyConnection, run_id: str) -> str:
    """The team a run's spend is charged to: as recorded with its bound, else its owner,
    else the default team."""
    row = first_row(
        con.execute(
            "SELECT team FROM run_cost_bounds WHERE run_id = ? "
            "UNION ALL SELECT team FROM object_owners WHERE kind = 'run' AND object_id = ? LIMIT 1",
            [run_id, run_id],
        )
    )
    return str(row[0]) if row else DEFAULT_TEAM


def update_ledger(con: duckdb.DuckDBPyConnection, run_id: str, team: str) -> float:
    """Upsert the run's ledger rows from its records; answer its spend so far (USD)."""
    con.execute(_LEDGER_SQL, [team, run_id])
    row = first_row(
        con.execute("SELECT coalesce(sum(usd), 0) FROM spend_ledger WHERE run_id = ?", [run_id])
    )
    return float(row[0]) if row else 0.0


def stop_reason(con: duckdb.DuckDBPyConnection, run_id: str) -> tuple[str | None, str | None]:
    """Why the control plane stopped the run (``budget``) and its figures; Nones when
    it did not."""
    row = first_row(
        con.execute(
            "SELECT stop_reason, stop_detail FROM run_cost_bounds WHERE run_id = ?", [run_id]
        )
    )
    return (None, None) if row is None else (row[0], row[1])


class SpendWatch:
    """The control loop's budget step: every ``SPEND_CHECK_S`` per run, the run's
    ledger rows from its records, then its cap and its team's month against them."""

    def __init__(self, con: duckdb.DuckDBPyConnection, teams: TeamSettings | None = None) -> None:
        self.con = con
        self.teams = teams or TeamSettings()
        # Per run: when its spend was last checked, and its records then.
        self._checked: dict[str, tuple[float, int]] = {}

    def due(self, coordinator: Coordinator) -> bool:
        """Whether ``coordinator``'s spend is to be checked now: at most every
        ``SPEND_CHECK_S``, and only when records arrived since the last check."""
        if coordinator.state != RunState.RUNNING or coordinator.cancel_deadline is not None:
            return False
        now = time.monotonic()
        run_id = coordinator.run_id
        last, seen = self._checked.get(run_id, (0.0, -1))
        if now - last < SPEND_CHECK_S or coordinator.records_ingested == seen:
            return False
        self._checked[run_id] = (now, coordinator.records_ingested)
        return True

    async def check(self, coordinator: Coordinator) -> str | None:
        """The control loop's step for one run: when due, its ledger and budgets, on a
        cursor of its own in a worker thread (the query scans the run's records, so the
        loop keeps serving); the reason it is stopped by its budget (recorded), or None."""
        if not self.due(coordinator):
            return None
        cursor = self.con.cursor()
        try:
            reason = await asyncio.to_thread(self.over, coordinator.run_id, cursor)
        except duckdb.Error:
            # E.g. a write conflict with the ledger's settle: the next check recomputes.
            log.exception("run %s: its spend could not be checked", coordinator.run_id)
            return None
        finally:
            cursor.close()
        if reason is not None:
            self.stopped(coordinator.run_id, reason)
        return reason

    def over(self, run_id: str, con: duckdb.DuckDBPyConnection | None = None) -> str | None:
        """Update the run's ledger (on ``con``, default the watch's connection); the
        reason to stop it when its cap or its team's monthly budget is reached (None: go
        on)."""
        con = con or self.con
        priced = first_row(
            con.execute(
                "SELECT count(*) FROM providers WHERE run_id = ? AND input_per_mtok IS NOT NULL",
                [run_id],
            )
        )
        if not priced or not priced[0]:
            return None
        team = run_team(con, run_id)
        spent = update_ledger(con, run_id, team)
        cap = first_row(
            con.execute("SELECT max_cost_usd FROM run_cost_bounds WHERE run_id = ?", [run_id])
        )
        if cap is not None and cap[0] is not None and spent >= float(cap[0]):
            return (
                f"budget: the run spent ${spent:,.4f}, reaching its cap ${float(cap[0]):,.4f} "
                f"({RUN_CAP_SETTING})"
            )
        policy = TeamStore(con, self.teams).policy(team)
        budget = policy.monthly_budget_usd
        if budget is not None:
            month = month_spend(con, team)
            if month >= budget:
                return (
                    f"budget: team {team} spent ${month:,.4f} this month, reaching its "
                    f"monthly budget ${budget:,.4f} ({policy.setting('monthly_budget_usd')})"
                )
        return None

    def stopped(self, run_id: str, reason: str) -> None:
        """Record that the run is stopped by its budget (its reason: ``budget``)."""
        log.warning("run %s: %s; cancelling", run_id, reason)
        self.con.execute(
            "INSERT INTO run_cost_bounds (run_id, team, created_at) VALUES (?, ?, now()) "
            "ON CONFLICT DO NOTHING",
            [run_id, run_team(self.con, run_id)],
        )
        self.con.execute(
            "UPDATE run_cost_bounds SET stop_reason = ?, stop_detail = ?, stopped_at = now() "
            "WHERE run_id = ?",
            [BUDGET_REASON, reason, run_id],
        )

    def settle(self, run_id: str) -> None:
        """The run closed: its ledger rows from every record it stored."""
        self._checked.pop(run_id, None)
        try:
            update_ledger(self.con, run_id, run_team(self.con, run_id))
        except duckdb.Error:  # logged; the run's records stay, the next read recomputes
            log.exception("run %s: its spend could not be written to the ledger", run_id)


@dataclass(frozen=True)
class DryRun:
    """A dry run's answer: the plan, the team's budget, and why the budget would refuse
    the run (None: admitted)."""

    plan: CostPlan
    budget: TeamBudget
    refused: str | None

    def to_json(self) -> dict[str, object]:
        """The body of ``POST /v1/runs?dry_run=true``."""
        return {
            "dry_run": True,
            "admitted": self.refused is None,
            "refused": self.refused,
            "plan": self.plan.to_json(),
            "budget": self.budget.to_json(),
        }


SPEND_GROUPS = ("provider", "day", "run")


def ledger_rows(
    con: duckdb.DuckDBPyConnection,
    team: str | None,
    since: dt.date,
    until: dt.date,
    group: str,
) -> list[dict[str, Any]]:
    """The ledger of ``team`` (None: every team) from ``since`` to ``until`` (UTC days,
    both included), summed per team and ``group`` (provider, day or run)."""
    if group not in SPEND_GROUPS:
        raise ValueError(f"group: one of {', '.join(SPEND_GROUPS)}")
    column = {"provider": "provider", "day": "day", "run": "run_id"}[group]
    rows = con.execute(
        f"SELECT team, {column}, count(DISTINCT run_id), sum(input_tokens), "  # noqa: S608
        "sum(output_tokens), sum(usd) FROM spend_ledger "
        "WHERE (? IS NULL OR team = ?) AND day BETWEEN ? AND ? "
        f"GROUP BY team, {column} ORDER BY team, {column}",
        [team, team, since, until],
    ).fetchall()
    return [
        {
            "team": str(r[0]),
            group: r[1].isoformat() if isinstance(r[1], dt.date) else str(r[1]),
            "runs": int(r[2]),
            "input_tokens": int(r[3]),
            "output_tokens": int(r[4]),
            "usd": float(r[5]),
        }
        for r in rows
    ]
