"""Keys of the hosted APIs' kinds (anthropic, openai-responses, gemini) go only to the
host their variable is bound to, only in the dialect's own header, and never into records
or logs.

A REST submitter names other variables (real provider keys bound elsewhere, an arbitrary
secret, a service setting) with these kinds at the attacker's catcher: the shards fail
naming the variable and the catcher receives nothing. The bound loopback key reaches the
catcher (its legitimate host) in ``x-api-key`` / ``Authorization`` / ``x-goog-api-key``
only, never in a URL (Gemini's ``?key=`` form) or a body, and the run's records (over REST)
and the worker's and control plane's logs never hold it.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from tests.fakes.catcher import Catcher
from tests.security.conftest import CANARIES, HostileStack, scenario_with
from tests.support.paths import PROVIDER_DATA

pytestmark = pytest.mark.integration

BOUND = "BOUND_TEST_KEY"


def submit(stack: HostileStack, scenario: dict[str, Any]) -> dict[str, Any]:
    """Start a run over REST and return its view once it ended."""
    created = stack.client.post("/v1/runs", json={"scenario": scenario})
    assert created.status_code == 201, created.text
    return stack.wait_for_run(created.json()["id"])


def shards(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The run's shards by provider name."""
    return {s["provider"]: s for stage in view["stages"] for s in stage["shards"]}


def assert_refused(shard: dict[str, Any], variable: str) -> None:
    """The shard failed before sending anything, naming the variable and the host."""
    assert shard["state"] == "failed", shard
    message = shard["message"] or ""
    assert variable in message and "'127.0.0.1'" in message, message
    assert shard["requests_done"] == 0


def entries(base: str, variable: str, suffix: str = "") -> list[dict[str, Any]]:
    return [
        {"name": f"claude{suffix}", "kind": "anthropic", "base_url": base, "model": "m",
         "api_key_env": variable},
        {"name": f"responses{suffix}", "kind": "openai-responses", "base_url": f"{base}/v1",
         "model": "m", "api_key_env": variable},
        {"name": f"gem{suffix}", "kind": "gemini", "base_url": base, "model": "m",
         "api_key_env": variable},
    ]  # fmt: skip


def test_unbound_variables_are_never_sent_by_the_hosted_kinds(
    hostile_stack: HostileStack, catcher: Catcher
) -> None:
    # Real provider keys bound elsewhere (OpenAI's to api.openai.com by the openai
    # preset), an arbitrary secret, and a setting of the service itself.
    attacks = {"0": "OPENAI_API_KEY", "1": "CANARY_SECRET", "2": "TOKENBENCH__API__TOKENS"}
    providers = [p for suffix, var in attacks.items() for p in entries(catcher.url, var, suffix)]
    view = submit(hostile_stack, scenario_with(*providers))
    found = shards(view)
    for suffix, variable in attacks.items():
        for name in ("claude", "responses", "gem"):
            assert_refused(found[f"{name}{suffix}"], variable)
    assert hostile_stack.canaries_in(catcher.received()) == []
    assert catcher.requests == []
    hostile_stack.assert_healthy()


def test_the_bound_key_goes_only_in_the_dialects_header_and_never_into_records_or_logs(
    hostile_stack: HostileStack, catcher: Catcher
) -> None:
    # The catcher answers each dialect with its recorded stream, so the runs succeed.
    for suffix, recorded in (
        ("/v1/messages", "anthropic/stream.sse"),
        ("/v1/responses", "openai-responses/stream.sse"),
        (":streamGenerateContent", "gemini/stream.sse"),
    ):
        body = (PROVIDER_DATA / recorded).read_bytes()
        catcher.answer(suffix, body, content_type="text/event-stream")
    view = submit(hostile_stack, scenario_with(*entries(catcher.url, BOUND), requests=2))
    assert view["state"] == "finished", view
    assert view["requests_done"] == 6 and view["errors"] == 0, view

    secret = CANARIES[BOUND]
    headers_by_path = {"/v1/messages": "x-api-key", "/v1/responses": "authorization"}
    assert len(catcher.requests) == 6
    for caught in catcher.requests:
        path = caught.path.split("?")[0]
        header = headers_by_path.get(path, "x-goog-api-key")
        lowered = {name.lower(): value for name, value in caught.headers.items()}
        assert secret in lowered[header], (path, lowered)
        assert all(secret not in value for name, value in lowered.items() if name != header)
        assert secret not in caught.path and secret.encode() not in caught.body
        if header == "x-goog-api-key":
            assert caught.path.endswith("/v1beta/models/m:streamGenerateContent?alt=sse")

    records = hostile_stack.client.get(f"/v1/runs/{view['id']}/records")
    assert records.status_code == 200, records.text
    assert secret.encode() not in records.content
    table = pa.ipc.open_stream(records.content).read_all()
    assert table.num_rows == 6
    assert set(table.column("response_id").to_pylist()) == {
        "msg_01XFDUDYJgAACzvnptvVoYEL",
        "resp_68af4030592c81938ec0a5fbab4a3e9f05438e46b5f69a3b",
        "mKqKaMe8Ke2Ux_APjZCq-QI",
    }
    assert secret not in hostile_stack.worker.text()
    assert secret not in hostile_stack.plane.text()
    hostile_stack.assert_healthy()
