"""Team quotas counted in DuckDB: active schedules and stored dataset bytes.

Runs going at once and runs queued are counted by the run queue
(``api/control/queue.py``); a token's request rate by ``api/rest/rate_limit.py``. Each
refusal is a :class:`~scenarios.errors.QuotaExceeded` (429) naming the quota and the
setting its figure comes from (docs/teams.md, "Quotas and fairness").

Objects are a team's by their ``object_owners`` row; one without a row (written before
teams existed) is team ``default``'s, as everywhere else (api/access/ownership.py).
"""

from __future__ import annotations

import duckdb

from analytics.sql.results import first_row
from api.access.caller import DEFAULT_TEAM
from api.access.teams import TeamPolicy
from scenarios.errors import QuotaExceeded


def active_schedules(con: duckdb.DuckDBPyConnection, team: str) -> int:
    """The team's active (not paused, not deleted) schedules."""
    row = first_row(
        con.execute(
            "SELECT count(*) FROM schedules AS s LEFT JOIN object_owners AS o "
            "ON o.kind = 'schedule' AND o.object_id = s.schedule_id "
            "WHERE s.state = 'active' AND coalesce(o.team, ?) = ?",
            [DEFAULT_TEAM, team],
        )
    )
    return int(row[0]) if row else 0


def dataset_bytes(con: duckdb.DuckDBPyConnection, team: str) -> int:
    """Bytes of the datasets the team keeps."""
    row = first_row(
        con.execute(
            "SELECT coalesce(sum(d.bytes), 0) FROM datasets AS d LEFT JOIN object_owners AS o "
            "ON o.kind = 'dataset' AND o.object_id = d.dataset_id "
            "WHERE coalesce(o.team, ?) = ?",
            [DEFAULT_TEAM, team],
        )
    )
    return int(row[0]) if row else 0


def check_schedules(con: duckdb.DuckDBPyConnection, policy: TeamPolicy) -> None:
    """429 when one more active schedule would pass the team's max_schedules."""
    active = active_schedules(con, policy.team)
    if active >= policy.max_schedules:
        setting = policy.setting("max_schedules")
        raise QuotaExceeded(
            f"team {policy.team} has {active} active schedules, its max_schedules "
            f"({setting}) is {policy.max_schedules}: pause or delete one first",
            quota="max_schedules",
            setting=setting,
        )


def check_dataset_bytes(con: duckdb.DuckDBPyConnection, policy: TeamPolicy, adding: int) -> None:
    """429 when ``adding`` more bytes would pass the team's max_dataset_bytes (an upload
    counts as many bytes as it sends, even one whose content is stored already)."""
    kept = dataset_bytes(con, policy.team)
    if kept + adding > policy.max_dataset_bytes:
        setting = policy.setting("max_dataset_bytes")
        raise QuotaExceeded(
            f"team {policy.team} keeps {kept:,} bytes of datasets; {adding:,} more would "
            f"pass its max_dataset_bytes ({setting}) of {policy.max_dataset_bytes:,}: "
            "delete some first",
            quota="max_dataset_bytes",
            setting=setting,
        )
