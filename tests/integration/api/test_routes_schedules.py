"""/v1/schedules and /v1/trends over HTTP: every refusal names its field (422), the
lifecycle (create, read, pause, resume, delete), the bound on schedules (409), and the
trend's formats by ``format`` and ``Accept``."""

from __future__ import annotations

import pytest

from api.rest.errors import NotAcceptable, UnknownFormat
from api.rest.routes import schedules as schedule_routes
from api.rest.routes.trends import trend_format
from scenarios.limits import MAX_URL_CHARS
from tests.integration.api.conftest import RestStack, lonely_region, run_scenario

pytestmark = pytest.mark.integration

YEARLY = "0 0 1 1 *"  # never fires while the tests run


def _scenario_id(stack: RestStack) -> str:
    answer = stack.client.post("/v1/scenarios", json=run_scenario(lonely_region()))
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"cron": "every day"}, "cron", "2 fields"),
        ({"cron": "*/30 * * * * *"}, "cron", "at most once every 60 s"),
        ({"cron": "0 9 1 * 1"}, "cron", "not both"),
        ({"cron": "0 0 31 2 *"}, "cron", "never fires"),
        ({"timezone": "Nowhere/Else"}, "timezone", "unknown time zone"),
        ({"webhook_url": "http://169.254.169.254/latest"}, "webhook_url", "always refused"),
        ({"webhook_url": "ftp://hooks.example/x"}, "webhook_url", "http(s)"),
        ({"webhook_url": "https://h.example/" + "x" * MAX_URL_CHARS}, "webhook_url", "at most"),
        ({"trend_window": 0}, "trend_window", "greater than or equal"),
        ({"min_change": -1}, "min_change", "greater than or equal"),
    ],
)
def test_a_bad_schedule_is_a_422_naming_its_field(
    rest_stack: RestStack, changes: dict[str, object], field: str, words: str
) -> None:
    body = {"scenario_id": _scenario_id(rest_stack), "cron": YEARLY, **changes}
    answer = rest_stack.client.post("/v1/schedules", json=body)
    assert answer.status_code == 422, answer.text
    problem = answer.json()["detail"][0]
    assert problem["loc"] == ["body", field]
    assert words in problem["msg"]
    assert answer.json()["error"] == "bad_input"


def test_the_scenario_is_checked_as_a_run_would_be(rest_stack: RestStack) -> None:
    unknown = rest_stack.client.post(
        "/v1/schedules", json={"scenario_id": "sc-nope", "cron": YEARLY}
    )
    assert unknown.status_code == 404 and "sc-nope" in unknown.json()["detail"]
    overrides = {"concurrency": [0]}
    bad = rest_stack.client.post(
        "/v1/schedules",
        json={"scenario_id": _scenario_id(rest_stack), "cron": YEARLY, "overrides": overrides},
    )
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["loc"][:3] == ["body", "overrides", "concurrency"]


def test_a_schedules_lifecycle(rest_stack: RestStack) -> None:
    client = rest_stack.client
    scenario_id = _scenario_id(rest_stack)
    created = client.post(
        "/v1/schedules",
        json={
            "scenario_id": scenario_id,
            "cron": YEARLY,
            "name": "yearly",
            "timezone": "Europe/Paris",
        },
    )
    assert created.status_code == 201, created.text
    schedule = created.json()
    sid = schedule["id"]
    assert schedule["state"] == "active" and schedule["next_fire_at"].endswith("-12-31T23:00:00Z")
    assert schedule["last_fire"] is None and schedule["last_webhook"] is None
    assert sid in [s["id"] for s in client.get("/v1/schedules").json()]
    paused = client.post(f"/v1/schedules/{sid}/pause").json()
    assert paused["state"] == "paused" and paused["next_fire_at"] is None
    resumed = client.post(f"/v1/schedules/{sid}/resume").json()
    assert resumed["state"] == "active" and resumed["next_fire_at"] == schedule["next_fire_at"]
    assert client.get(f"/v1/schedules/{sid}/runs").json() == []
    assert client.delete(f"/v1/schedules/{sid}").status_code == 204
    gone = client.get(f"/v1/schedules/{sid}")
    assert gone.status_code == 404 and gone.json()["detail"] == f"no schedule '{sid}'"
    assert sid not in [s["id"] for s in client.get("/v1/schedules").json()]
    # Its fires stay readable, and so does its trend (none ended yet).
    assert client.get(f"/v1/schedules/{sid}/runs").status_code == 200
    trend = client.get("/v1/trends", params={"schedule_id": sid}).json()
    assert trend["runs"] == [] and trend["selection"]["schedule_id"] == sid


def test_schedules_are_bounded(rest_stack: RestStack, monkeypatch: pytest.MonkeyPatch) -> None:
    live = len(rest_stack.client.get("/v1/schedules").json())
    monkeypatch.setattr(schedule_routes, "MAX_SCHEDULES", live)
    answer = rest_stack.client.post(
        "/v1/schedules", json={"scenario_id": _scenario_id(rest_stack), "cron": YEARLY}
    )
    assert answer.status_code == 409 and "delete one" in answer.json()["detail"]


def test_trend_formats_and_refusals(rest_stack: RestStack) -> None:
    client = rest_stack.client
    scenario_id = _scenario_id(rest_stack)
    assert client.get("/v1/trends").status_code == 422  # no selection
    both = client.get("/v1/trends", params={"scenario_id": scenario_id, "name": "routes"})
    assert both.status_code == 422 and "exactly one" in both.json()["detail"]
    assert client.get("/v1/trends", params={"schedule_id": "sch-nope"}).status_code == 404
    assert client.get("/v1/trends", params={"scenario_id": "sc-nope"}).status_code == 404
    params = {"scenario_id": scenario_id}
    markdown = client.get("/v1/trends", params={**params, "format": "markdown"})
    assert markdown.headers["content-type"].startswith("text/markdown")
    assert markdown.text.startswith(f"# trend of scenario {scenario_id}")
    csv = client.get("/v1/trends", params=params, headers={"accept": "text/csv"})
    assert csv.text.splitlines()[0].startswith("run_id,created_at,provider")
    html = client.get("/v1/trends", params={**params, "format": "html"})
    assert "sandbox" in html.headers["content-security-policy"]
    unknown = client.get("/v1/trends", params={**params, "format": "pdf"})
    assert unknown.status_code == 422 and "csv" in unknown.json()["formats"]
    refused = client.get("/v1/trends", params=params, headers={"accept": "image/png"})
    assert refused.status_code == 406


def test_the_trend_format_is_named_or_negotiated() -> None:
    assert trend_format("csv", None).media_type == "text/csv"
    assert trend_format(None, None).name == "json"
    assert trend_format(None, "text/markdown;q=0.9, text/html;q=0.5").name == "markdown"
    with pytest.raises(UnknownFormat):
        trend_format("pdf", None)
    with pytest.raises(NotAcceptable):
        trend_format(None, "image/png")
