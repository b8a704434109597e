"""api/rest/routes/scenarios.py through the served app: scenarios stored from YAML or
JSON bodies, read back in full, refused with the field (and line) of each problem."""

from __future__ import annotations

import json

import pytest
import yaml

from api.rest.routes import scenarios as scenario_routes
from api.rest.validation import PATH_REFUSED
from tests.integration.api.conftest import RestStack, lonely_region, run_scenario

pytestmark = pytest.mark.integration


def test_yaml_and_json_bodies_are_stored_and_read_back(rest_stack: RestStack) -> None:
    client = rest_stack.client
    first = run_scenario(lonely_region()) | {"name": "from-yaml"}
    second = run_scenario(lonely_region(), levels=(4,)) | {"name": "from-json"}
    stored_yaml = client.post(
        "/v1/scenarios",
        content=yaml.safe_dump(first).encode(),
        headers={"content-type": "application/yaml"},
    )
    stored_json = client.post("/v1/scenarios", content=json.dumps(second).encode())
    assert stored_yaml.status_code == stored_json.status_code == 201, stored_yaml.text
    yaml_id, json_id = stored_yaml.json()["id"], stored_json.json()["id"]
    assert yaml_id != json_id
    assert stored_yaml.json()["name"] == "from-yaml"
    assert stored_yaml.json()["scenario"] is None  # the answer names it; GET returns it

    full = client.get(f"/v1/scenarios/{json_id}").json()
    assert full["id"] == json_id and full["name"] == "from-json"
    # Stored validated: what was sent, with every default filled in.
    assert full["scenario"]["load"]["concurrency"] == [4]
    assert full["scenario"]["regions"] == second["regions"]
    assert "seed" in full["scenario"] and "seed" not in second

    listed = [s["id"] for s in client.get("/v1/scenarios").json()]
    assert listed.index(json_id) < listed.index(yaml_id)  # newest first


def test_problems_are_answered_at_their_field(rest_stack: RestStack) -> None:
    client = rest_stack.client
    broken_yaml = client.post("/v1/scenarios", content=b"name: x\nproviders: [\n")
    assert broken_yaml.status_code == 422
    assert broken_yaml.json()["error"] == "bad_input"
    assert broken_yaml.json()["detail"][0]["line"] is not None

    metadata = run_scenario(lonely_region())
    metadata["providers"][0] = {
        "name": "meta",
        "kind": "openai",
        "base_url": "http://169.254.169.254/v1",
        "model": "m",
    }
    refused = client.post("/v1/scenarios", json=metadata)
    assert refused.status_code == 422
    assert refused.json()["detail"][0]["loc"] == ["scenario", "providers", 0, "base_url"]

    # A REST scenario never names a file of the server's: refused without looking at it.
    with_path = run_scenario(lonely_region())
    with_path["workload"]["prompts"] = {"path": "/etc/passwd"}
    answer = client.post("/v1/scenarios", json=with_path)
    assert answer.status_code == 422
    assert answer.json()["detail"] == [
        {"loc": ["scenario", "workload", "prompts", "path"], "msg": PATH_REFUSED}
    ]

    unknown = client.get("/v1/scenarios/sc-nope")
    assert unknown.status_code == 404
    assert unknown.json() == {"detail": "no scenario 'sc-nope'", "error": "not_found"}


def test_a_token_is_required(rest_stack: RestStack) -> None:
    with rest_stack.anonymous() as anonymous:
        assert anonymous.get("/v1/scenarios").status_code == 401
        assert anonymous.post("/v1/scenarios", json=run_scenario("x")).status_code == 401


def test_openapi_documents_the_body_as_the_scenario_schema(rest_stack: RestStack) -> None:
    document = rest_stack.client.get("/openapi.json").json()
    body = document["paths"]["/v1/scenarios"]["post"]["requestBody"]["content"]
    for media in ("application/yaml", "application/json"):
        assert body[media]["schema"] == scenario_routes._SCENARIO_SCHEMA
    # The reference resolves: clients and fuzzers can generate scenarios from it.
    assert "providers" in document["components"]["schemas"]["Scenario"]["properties"]
