"""``/v1/scenarios``: store and read scenarios."""

from __future__ import annotations

from fastapi import APIRouter, Request

from api.deps import Authenticated, ScenarioStoreDep, SettingsDep
from api.schemas import ScenarioPublic
from api.validation import check_scenario_egress, scenario_from_body

router = APIRouter(prefix="/v1/scenarios", tags=["scenarios"], dependencies=[Authenticated])


@router.post(
    "",
    status_code=201,
    response_model=ScenarioPublic,
    openapi_extra={
        "requestBody": {
            "content": {"application/yaml": {"schema": {"type": "string"}}, "application/json": {}},
            "required": True,
        }
    },
)
async def create_scenario(
    request: Request, store: ScenarioStoreDep, settings: SettingsDep
) -> ScenarioPublic:
    """Store a scenario sent as YAML or JSON; answers its id."""
    scenario = scenario_from_body(await request.body())
    check_scenario_egress(scenario, settings.egress)
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
