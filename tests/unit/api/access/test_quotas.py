"""api/access/quotas.py: a team's active schedules and dataset bytes, unowned objects
counted as team default's, each refusal naming the quota and its setting."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from analytics.store.db import connect
from api.access.caller import Caller, Role
from api.access.ownership import Kind, record_owner
from api.access.quotas import check_dataset_bytes, check_schedules, dataset_bytes
from api.access.teams import TeamStore
from scenarios.errors import QuotaExceeded
from scenarios.settings import TeamSettings


def test_dataset_bytes_per_team(tmp_path: Path) -> None:
    con = connect(tmp_path / "q.duckdb")
    now = dt.datetime.now(dt.UTC)
    for dataset_id, size in (("ds-red", 300), ("ds-old", 50)):
        con.execute(
            "INSERT INTO datasets (dataset_id, bytes, entries, kinds, created_at, content) "
            "VALUES (?, ?, 1, ['prompts'], ?, 'x')",
            [dataset_id, size, now],
        )
    record_owner(con, Kind.DATASET, "ds-red", Caller("tok-r", "red", Role.SUBMITTER))
    assert dataset_bytes(con, "red") == 300
    assert dataset_bytes(con, "default") == 50  # no owner row: team default's
    policy = TeamStore(con, TeamSettings(max_dataset_bytes=400)).policy("red")
    check_dataset_bytes(con, policy, 100)
    with pytest.raises(QuotaExceeded) as refused:
        check_dataset_bytes(con, policy, 101)
    assert refused.value.quota == "max_dataset_bytes"
    assert "TOKENBENCH__TEAMS__MAX_DATASET_BYTES" in str(refused.value)


def test_no_schedule_past_the_quota(tmp_path: Path) -> None:
    con = connect(tmp_path / "q.duckdb")
    policy = TeamStore(con, TeamSettings(max_schedules=0)).policy("red")
    with pytest.raises(QuotaExceeded) as refused:
        check_schedules(con, policy)
    assert refused.value.setting == "TOKENBENCH__TEAMS__MAX_SCHEDULES"
    assert "team red has 0 active schedules" in str(refused.value)
