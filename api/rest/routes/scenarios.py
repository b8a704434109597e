"""``/v1/scenarios``: store and read scenarios."""

from __future__ import annotations

from fastapi import APIRouter, Request

from analytics.datasets import DatasetStore
from api.rest.deps import Authenticated, HeavyDep, ScenarioStoreDep, SettingsDep, WriterDep
from api.rest.validation import (
    check_scenario_datasets,
    check_scenario_egress,
    check_scenario_upstreams,
    scenario_from_body,
)
from api.schemas import ScenarioPublic

router = APIRouter(prefix="/v1/scenarios", tags=["scenarios"], dependencies=[Authenticated])

# The body is documented as the scenario JSON Schema (components/schemas/Scenario) in both
# encodings, so clients and fuzzers can generate scenarios; the handler parses and
# validates the raw body itself, so YAML problems are answered with their line numbers.
_SCENARIO_SCHEMA = {"$ref": "#/components/schemas/Scenario"}


@router.post(
    "",
    status_code=201,
    response_model=ScenarioPublic,
    openapi_extra={
        "requestBody": {
            "content": {
                "application/yaml": {"schema": _SCENARIO_SCHEMA},
                "application/json": {"schema": _SCENARIO_SCHEMA},
            },
            "required": True,
        }
    },
)
async def create_scenario(
    request: Request,
    store: ScenarioStoreDep,
    settings: SettingsDep,
    writer: WriterDep,
    heavy: HeavyDep,
) -> ScenarioPublic:
    """Store a scenario sent as YAML or JSON; answers its id."""
    # Off the event loop: parsing and validating a large body takes a while.
    body = await request.body()
    scenario = await heavy.run("a scenario's validation", scenario_from_body, body)
    check_scenario_upstreams(scenario)
    check_scenario_egress(scenario, settings.egress)
    check_scenario_datasets(scenario, DatasetStore(writer))
    stored = store.add(scenario)
    return ScenarioPublic(id=stored.scenario_id, name=stored.name, created_at=stored.created_at)


@router.get("", response_model=list[ScenarioPublic])
async def list_scenarios(store: ScenarioStoreDep) -> list[ScenarioPublic]:
    """Stored scenarios, newest first."""
    return [
        ScenarioPublic(id=s.scenario_id, name=s.name, created_at=s.created_at) for s in store.list()
    ]


@router.get("/{scenario_id}", response_model=ScenarioPublic)
async def get_scenario(scenario_id: str, store: ScenarioStoreDep) -> ScenarioPublic:
    """One stored scenario, in full."""
    stored = store.get(scenario_id)
    return ScenarioPublic(
        id=stored.scenario_id, name=stored.name, created_at=stored.created_at,
        scenario=stored.scenario,
    )  # fmt: skip
