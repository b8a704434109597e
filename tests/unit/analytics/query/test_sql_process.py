"""The query child: it answers, refuses and times out on a database copy."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from analytics.query.safe_sql import SqlLimits, SqlRefused, SqlTimeout
from analytics.query.snapshot import SqlSnapshot
from analytics.query.sql_process import run_in_child
from analytics.store.db import connect


def test_child_process_answers_refuses_and_times_out(tmp_path: Path) -> None:
    writer = connect(tmp_path / "c.duckdb")
    path = SqlSnapshot.of(writer).refresh(writer).path
    limits = SqlLimits(max_rows=5, timeout_s=0.5)
    result = asyncio.run(run_in_child(path, "SELECT * FROM range(20)", limits))
    assert result.table.num_rows == 5 and result.truncated
    with pytest.raises(SqlRefused, match="COPY"):
        asyncio.run(run_in_child(path, "COPY runs TO '/tmp/x.csv'", limits))
    with pytest.raises(SqlTimeout):
        asyncio.run(run_in_child(path, "SELECT count(*) FROM range(100000000000)", limits))
