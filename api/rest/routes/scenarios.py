"""``/v1/scenarios``: store and read scenarios."""

from __future__ import annotations

from typing import Any

import duckdb
from fastapi import APIRouter, Request, Response

from analytics.datasets.uploads import DatasetStore
from api.access.audit import audit
from api.access.caller import Caller
from api.access.ownership import (
    Kind,
    check_change,
    check_read,
    readable,
    record_owner,
    visible_sql,
)
from api.rest.deps import (
    Authenticated,
    CallerDep,
    HeavyDep,
    ScenarioStoreDep,
    ScheduleServiceDep,
    SettingsDep,
    SubmitterDep,
    WriterDep,
)
from api.rest.offload import json_response
from api.rest.scenario_store import scenario_headers, stored_scenario
from api.rest.validation import (
    check_scenario_datasets,
    check_scenario_egress,
    check_scenario_upstreams,
    scenario_from_body,
)
from api.schemas import ScenarioPublic
from scenarios.errors import Conflict, TokenbenchError

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
    caller: SubmitterDep,
) -> ScenarioPublic:
    """Store a scenario sent as YAML or JSON; answers its id. It belongs to the
    caller's team; the datasets it names must be ones the caller may read."""
    # Off the event loop: parsing and validating a large body takes a while.
    body = await request.body()
    scenario = await heavy.run("a scenario's validation", scenario_from_body, body)
    check_scenario_upstreams(scenario)
    check_scenario_egress(scenario, settings.egress)
    check_scenario_datasets(
        scenario,
        DatasetStore(writer),
        lambda dataset_id: readable(writer, caller, Kind.DATASET, dataset_id),
    )
    stored = store.add(scenario)
    record_owner(writer, Kind.SCENARIO, stored.scenario_id, caller)
    audit(writer, caller, "scenario.store", "scenario", stored.scenario_id, "ok")
    return ScenarioPublic(id=stored.scenario_id, name=stored.name, created_at=stored.created_at)


@router.get("", response_model=list[ScenarioPublic])
async def list_scenarios(
    writer: WriterDep, heavy: HeavyDep, caller: CallerDep
) -> list[ScenarioPublic]:
    """Stored scenarios the caller may read, newest first."""
    headers = await heavy.on_cursor("the list of scenarios", writer, _headers, caller)
    return [ScenarioPublic(id=id_, name=name, created_at=created) for id_, name, created in headers]


@router.get("/{scenario_id}", response_model=ScenarioPublic)
async def get_scenario(
    scenario_id: str, writer: WriterDep, heavy: HeavyDep, caller: CallerDep
) -> Response:
    """One stored scenario, in full (404 for one the caller may not read)."""
    check_read(writer, caller, Kind.SCENARIO, scenario_id)
    return await heavy.on_cursor("a stored scenario", writer, _scenario_answer, scenario_id)


def _headers(cursor: duckdb.DuckDBPyConnection, caller: Caller) -> list[tuple[str, str, Any]]:
    visible, params = visible_sql(Kind.SCENARIO, caller, "api_scenarios.scenario_id")
    return scenario_headers(cursor, (visible, params))


def _scenario_answer(cursor: duckdb.DuckDBPyConnection, scenario_id: str) -> Response:
    # Up to the body cap of JSON (~100,000 values): parsed and encoded off the loop.
    stored = stored_scenario(cursor, scenario_id)
    return json_response(
        ScenarioPublic(
            id=stored.scenario_id, name=stored.name, created_at=stored.created_at,
            scenario=stored.scenario,
        )
    )  # fmt: skip


@router.delete("/{scenario_id}", status_code=204)
async def delete_scenario(
    scenario_id: str,
    store: ScenarioStoreDep,
    schedules: ScheduleServiceDep,
    writer: WriterDep,
    caller: SubmitterDep,
) -> Response:
    """Remove a stored scenario of the caller's team: 404 for one it may not read, 403
    for another team's, 409 while a schedule fires it. Its runs keep their own copy."""
    try:
        check_read(writer, caller, Kind.SCENARIO, scenario_id)
        store.get(scenario_id)
        check_change(writer, caller, Kind.SCENARIO, scenario_id)
        firing = [s.schedule_id for s in schedules.store.live() if s.scenario_id == scenario_id]
        if firing:
            raise Conflict(f"schedules {', '.join(firing)} fire this scenario: delete them first")
    except TokenbenchError as exc:
        audit(writer, caller, "scenario.delete", "scenario", scenario_id, "refused",
              error=type(exc).__name__)  # fmt: skip
        raise
    store.delete(scenario_id)
    audit(writer, caller, "scenario.delete", "scenario", scenario_id, "ok")
    return Response(status_code=204)
