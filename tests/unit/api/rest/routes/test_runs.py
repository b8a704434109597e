"""The list of runs: newest first, as many as fit its shard budget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analytics.store.db import connect
from analytics.store.runs import RunStore
from api.access.caller import LOCAL_OWNER
from api.control.run_coordinator import RunCoordinator
from api.rest.routes import runs
from scenarios.model import Scenario


def tiny(name: str) -> Scenario:
    """Two providers × two levels: four shards."""
    return Scenario.model_validate(
        {
            "name": name,
            "providers": [{"name": f"p{i}", "kind": "simulated"} for i in range(2)],
            "workload": {
                "mix": [
                    {
                        "prompt_tokens": {"dist": "fixed", "value": 8},
                        "output_tokens": {"dist": "fixed", "value": 4},
                    }
                ]
            },
            "load": {"concurrency": [1, 2], "requests_per_level": 2},
        }
    )


def test_the_list_leaves_out_older_runs_past_its_shard_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    con = connect(tmp_path / "runs.duckdb")
    for index in range(3):
        RunCoordinator.create(f"run-{index}", tiny(f"run-{index}"), RunStore(con), 512)
    monkeypatch.setattr(runs, "MAX_LISTED_SHARDS", 9)  # two runs of four shards fit

    answer = runs._run_list(con, LOCAL_OWNER, 100, 512)
    listed = json.loads(answer.body)
    assert [view["id"] for view in listed] == ["run-2", "run-1"]
    assert answer.headers["x-tokenbench-truncated"] == "true"
    assert all(sum(len(s["shards"]) for s in view["stages"]) == 4 for view in listed)

    whole = runs._run_list(con, LOCAL_OWNER, 2, 512)
    assert len(json.loads(whole.body)) == 2
    assert whole.headers["x-tokenbench-truncated"] == "false"
