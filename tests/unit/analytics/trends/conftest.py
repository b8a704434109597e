"""A real trend for the tests of its text and formats: two steady runs, then a slow one."""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics.store.db import connect
from analytics.trends.build import TrendReport, TrendSelection, build_trend
from tests.support.analytics_builders import store_trend_runs


@pytest.fixture(scope="module")
def slow_trend(tmp_path_factory: pytest.TempPathFactory) -> TrendReport:
    con = connect(Path(tmp_path_factory.mktemp("trend")) / "trend.duckdb")
    store_trend_runs(con, [20.0, 20.3, 80.0])
    return build_trend(con, TrendSelection(schedule_id="sch-1"))
