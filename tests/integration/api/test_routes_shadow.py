"""api/rest/routes/shadow.py through the served app: a shadow session opened for a
gateway config, read (summary, comparison, pairs, replay log) and stopped."""

from __future__ import annotations

import time

import pytest

from api.rest.routes import shadow
from tests.integration.api.conftest import RestStack, gateway_config, lonely_region

pytestmark = pytest.mark.integration


def test_a_session_is_opened_read_and_stopped(rest_stack: RestStack) -> None:
    client = rest_stack.client
    region = lonely_region()
    opened = client.post(
        "/v1/shadow-sessions", json={"config": gateway_config(region), "wait_for_workers": True}
    )
    assert opened.status_code == 201, opened.text
    session = opened.json()["id"]
    assert opened.json()["state"] == "running"
    assert opened.json()["shards"]  # the primary's and each shadow's, per region

    summary = client.get(f"/v1/shadow-sessions/{session}").json()
    assert summary["id"] == session and summary["name"] == "routes-shadow"
    assert summary["requests_captured"] == summary["requests_sampled"] == 0
    assert summary["config"]["regions"] == [region]
    assert session in [s["id"] for s in client.get("/v1/shadow-sessions").json()]
    assert client.get(f"/v1/shadow-sessions/{session}/comparison").json() == {
        "session": session,
        "comparison": [],
    }
    assert client.get(f"/v1/shadow-sessions/{session}/pairs").json() == []
    replay = client.get(f"/v1/shadow-sessions/{session}/replay")
    assert replay.headers["content-type"] == shadow.NDJSON
    assert replay.content == b""  # nothing captured with text

    stopped = client.post(f"/v1/shadow-sessions/{session}/stop", params={"drain_s": 0})
    assert stopped.status_code == 202
    assert stopped.json()["state"] == "stopping"
    deadline = time.monotonic() + 30
    while client.get(f"/v1/shadow-sessions/{session}").json()["state"] == "running":
        assert time.monotonic() < deadline, "the session did not end"
        time.sleep(0.1)
    # Once ended, stopping again changes nothing.
    assert client.post(f"/v1/shadow-sessions/{session}/stop").json()["state"] == "finished"


def test_refusals_name_the_problem(rest_stack: RestStack) -> None:
    client = rest_stack.client
    region = lonely_region()
    without_worker = client.post("/v1/shadow-sessions", json={"config": gateway_config(region)})
    assert without_worker.status_code == 409
    assert without_worker.json()["regions"] == [region]

    config = gateway_config(region) | {"sample_rate": 2}
    invalid = client.post("/v1/shadow-sessions", json={"config": config})
    assert invalid.status_code == 422
    assert invalid.json()["detail"][0]["loc"] == ["config", "sample_rate"]

    metadata = gateway_config(region)
    metadata["primary"]["base_url"] = "http://169.254.169.254/v1"
    assert client.post("/v1/shadow-sessions", json={"config": metadata}).status_code == 422

    for path in ("", "/comparison", "/pairs", "/replay"):
        missing = client.get(f"/v1/shadow-sessions/no-such-session{path}")
        assert missing.status_code == 404, path
        assert missing.json() == {
            "detail": "no shadow session 'no-such-session'",
            "error": "not_found",
        }
    assert client.post("/v1/shadow-sessions/x/stop", params={"drain_s": 601}).status_code == 422
    with rest_stack.anonymous() as anonymous:
        assert anonymous.get("/v1/shadow-sessions").status_code == 401
