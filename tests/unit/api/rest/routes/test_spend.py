"""api/rest/routes/spend.py, called as FastAPI calls it: a team reads its own ledger, an
admin any team's, anyone else is refused; days out of order are bad input."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from analytics.store.db import connect
from api.access.caller import Caller, Role
from api.control.spend import update_ledger
from api.rest.routes.spend import get_spend
from scenarios.errors import BadInput, Refused
from scenarios.settings import Settings
from tests.support.builders import REPORT_SCENARIO, ok_result, store_run

DAY = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=365)


def caller(team: str, role: Role) -> Caller:
    return Caller(token_id="tok-x", team=team, role=role, name=None, bootstrap=False)


def test_own_team_and_admin_read_others_are_refused(tmp_path: Path) -> None:
    con = connect(tmp_path / "s.duckdb")
    store_run(con, "r1", REPORT_SCENARIO, {("api", 0): [ok_result(0, 10.0, [1.0] * 9)]})
    update_ledger(con, "r1", "red")
    settings = Settings()
    mine = get_spend(caller("red", Role.VIEWER), con, settings, since=DAY, group="run")
    assert [r["run"] for r in mine["rows"]] == ["r1"]  # type: ignore[index,union-attr]
    admin = get_spend(caller("blue", Role.ADMIN), con, settings, team="red", since=DAY)
    assert admin["total_usd"] == mine["total_usd"]
    with pytest.raises(Refused):
        get_spend(caller("blue", Role.SUBMITTER), con, settings, team="red")
    with pytest.raises(BadInput):
        get_spend(
            caller("red", Role.VIEWER), con, settings, since=DAY, until=DAY - dt.timedelta(days=1)
        )
