"""api/rest/scenario_store.py on a real DuckDB file: scenarios round-trip as validated,
newest first, across connections; an unknown id is NotFound (404 over REST)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import pytest

from api.rest.errors import UnknownScenarioError
from api.rest.scenario_store import ScenarioStore
from scenarios.errors import NotFound
from scenarios.loader import validate_scenario
from scenarios.model import Scenario


def _scenario(name: str) -> Scenario:
    return validate_scenario(
        {
            "name": name,
            "providers": [
                {
                    "name": "hosted",
                    "kind": "openai",
                    "base_url": "https://api.example.com/v1",
                    "model": "m",
                    "api_key_env": "SOME_PROVIDER_KEY",
                }
            ],
            "workload": {
                "mix": [
                    {
                        "prompt_tokens": {"dist": "fixed", "value": 8},
                        "output_tokens": {"dist": "fixed", "value": 4},
                    }
                ]
            },
            "load": {"concurrency": [1, 2], "requests_per_level": 5},
        }
    )


def test_a_scenario_round_trips_across_connections(tmp_path: Path) -> None:
    path = tmp_path / "store.duckdb"
    scenario = _scenario("round-trip")
    with duckdb.connect(str(path)) as con:
        stored = ScenarioStore(con).add(scenario)
    assert stored.scenario_id.startswith("sc-") and stored.name == "round-trip"
    assert stored.created_at.tzinfo is not None
    with duckdb.connect(str(path)) as con:  # the table is there already: kept as it is
        again = ScenarioStore(con).get(stored.scenario_id)
    assert again.scenario == scenario.model_dump(mode="json") == stored.scenario
    assert Scenario.model_validate(again.scenario) == scenario
    assert again.created_at == stored.created_at
    # Keys are stored as the variable that holds them, never a value.
    assert again.scenario["providers"][0]["api_key_env"] == "SOME_PROVIDER_KEY"


def test_listed_newest_first(tmp_path: Path) -> None:
    with duckdb.connect(str(tmp_path / "store.duckdb")) as con:
        store = ScenarioStore(con)
        ids = [store.add(_scenario(f"s{i}")).scenario_id for i in range(3)]
        listed = store.list()
    assert len(set(ids)) == 3
    assert [s.scenario_id for s in listed] == ids[::-1]
    assert [s.name for s in listed] == ["s2", "s1", "s0"]
    created = [s.created_at for s in listed]
    assert created == sorted(created, reverse=True)
    assert all(isinstance(t, dt.datetime) for t in created)


def test_an_unknown_id_is_not_found(tmp_path: Path) -> None:
    with duckdb.connect(str(tmp_path / "store.duckdb")) as con:
        store = ScenarioStore(con)
        with pytest.raises(UnknownScenarioError) as caught:
            store.get("sc-missing")
    assert isinstance(caught.value, NotFound) and caught.value.http_status == 404
    assert caught.value.public_detail() == "no scenario 'sc-missing'"
