"""The stored view reads a run's stages as stored, the same as the stored plan says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from analytics.store.db import connect
from analytics.store.runs import RunStore
from api.control.planner import stored_stages
from api.control.run_coordinator import RunCoordinator
from api.control.run_views import stored_view
from scenarios.model import Scenario


def scenario(load: dict[str, Any], providers: int) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "views",
            "providers": [{"name": f"p{i}", "kind": "simulated"} for i in range(providers)],
            "workload": {
                "mix": [
                    {
                        "prompt_tokens": {"dist": "fixed", "value": 8},
                        "output_tokens": {"dist": "fixed", "value": 4},
                    }
                ]
            },
            "load": load,
            "regions": ["r0", "r1"],
        }
    )


@pytest.fixture
def con(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    return connect(tmp_path / "views.duckdb")


def expected(con: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
    """(stage, level, rate, [(shard, rate)]) from the parsed stored plan."""
    stored = RunStore(con).stored_plan("run")
    assert stored is not None
    return [
        (
            s.index,
            s.concurrency,
            s.rate,
            sorted((x.shard_id, s.rate_of(x.provider.name)) for x in s.shards),
        )
        for s in stored_stages([(p.stage_concurrency, p.spec) for p in stored])
    ]


def viewed(con: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
    view = stored_view(con, "run")
    return [
        (s.index, s.concurrency, s.rate, sorted((x.shard_id, x.rate) for x in s.shards))
        for s in view.stages
    ]


@pytest.mark.parametrize(
    "load",
    [
        {"concurrency": [1, 700, 3], "requests_per_level": 1000},  # 700 is split in two parts
        {"rate": {"rps": [5, 500], "max_in_flight": 1000}, "requests_per_level": 2000},
    ],
)
def test_the_stored_view_has_the_levels_and_rates_of_the_stored_plan(
    con: duckdb.DuckDBPyConnection, load: dict[str, Any]
) -> None:
    RunCoordinator.create("run", scenario(load, 3), RunStore(con), 512)
    assert viewed(con) == expected(con)
    assert sum(len(shards) for *_, shards in viewed(con)) > 3 * 2 * 2


def test_a_run_stored_before_plans_were_is_re_planned(con: duckdb.DuckDBPyConnection) -> None:
    RunCoordinator.create(
        "run", scenario({"concurrency": [1, 4], "requests_per_level": 8}, 2), RunStore(con), 512
    )
    planned = viewed(con)
    con.execute("UPDATE shards SET spec = NULL, stage_concurrency = NULL")
    assert viewed(con) == planned
