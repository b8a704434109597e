"""api/rest/run_start.py: the checks every run passes, from POST /v1/runs or a schedule's
fire: one scenario source, the overrides applied before validation, the egress policy
and the datasets, each refusal at its field."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from analytics.store.db import connect
from api.rest.errors import ProviderEgressDenied, UnknownScenarioError
from api.rest.run_start import RunStarter
from api.rest.scenario_store import ScenarioStore
from api.schemas import RunCreate, RunOverrides
from scenarios.loader import ScenarioError, validate_scenario
from scenarios.settings import Settings


def _scenario(base_url: str = "https://api.example/v1") -> dict[str, Any]:
    return {
        "name": "starter",
        "providers": [{"name": "p", "kind": "openai", "base_url": base_url, "model": "m"}],
        "workload": {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 4},
                    "output_tokens": {"dist": "fixed", "value": 2},
                }
            ]
        },
        "load": {"concurrency": [1], "requests_per_level": 2},
    }


def _starter(tmp_path: Path) -> RunStarter:
    con = connect(tmp_path / "start.duckdb")
    # The loop and Redis are not reached by the checks.
    return RunStarter(None, None, ScenarioStore(con), Settings(), con)  # type: ignore[arg-type]


def test_a_stored_scenario_gets_its_overrides(tmp_path: Path) -> None:
    starter = _starter(tmp_path)
    stored = starter.scenarios.add(validate_scenario(_scenario()))
    body = RunCreate(scenario_id=stored.scenario_id, overrides=RunOverrides(concurrency=[4, 8]))
    scenario = asyncio.run(starter.checked_scenario(body))
    assert scenario.load.concurrency == [4, 8] and scenario.name == "starter"


def test_the_checks_refuse_at_the_field(tmp_path: Path) -> None:
    starter = _starter(tmp_path)
    with pytest.raises(ScenarioError, match="exactly one"):
        asyncio.run(starter.checked_scenario(RunCreate()))
    with pytest.raises(UnknownScenarioError):
        asyncio.run(starter.checked_scenario(RunCreate(scenario_id="sc-nope")))
    metadata = RunCreate(scenario=_scenario("http://169.254.169.254/v1"))
    with pytest.raises(ProviderEgressDenied) as caught:
        asyncio.run(starter.checked_scenario(metadata))
    assert caught.value.path == ["providers", 0, "base_url"]
