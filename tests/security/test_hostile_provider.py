"""A provider that answers with absurd figures: every request is still recorded.

A submitter controls the endpoint a run measures, so the endpoint's answers are input
too. Token counts past what a record column holds (2^31 - 1), negative counts and
server timings past 2^63 ns must not make a record batch unencodable (which would lose
every record of the batch): the counts are not believed (completions fall back to counted
events, the prompt count to unknown) and the run records exactly what it planned.
"""

from __future__ import annotations

import io
import json

import pyarrow.parquet as pq
import pytest

from tests.fakes.catcher import Catcher
from tests.security.conftest import HostileStack, scenario_with

pytestmark = pytest.mark.integration


def _stream(usage: dict[str, int]) -> bytes:
    events = [
        {"choices": [{"index": 0, "delta": {"role": "assistant"}}]},
        {"choices": [{"index": 0, "delta": {"content": " a"}}]},
        {"choices": [{"index": 0, "delta": {"content": " b"}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage},
    ]
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    return body + b"data: [DONE]\n\n"


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": 10**12, "completion_tokens": 2},
        {"prompt_tokens": 4, "completion_tokens": -5},
        {"prompt_tokens": 2**31, "completion_tokens": 2**40},
    ],
    ids=["huge-prompt", "negative", "past-int32"],
)
def test_absurd_usage_is_not_believed_and_nothing_is_lost(
    hostile_stack: HostileStack, catcher: Catcher, usage: dict[str, int]
) -> None:
    catcher.answer("/chat/completions", _stream(usage), content_type="text/event-stream")
    provider = {"name": "liar", "kind": "openai", "base_url": f"{catcher.url}/v1", "model": "m"}
    created = hostile_stack.client.post(
        "/v1/runs", json={"scenario": scenario_with(provider, requests=5)}
    )
    assert created.status_code == 201, created.text
    run_id = created.json()["id"]
    view = hostile_stack.wait_for_run(run_id)
    assert view["state"] == "finished", view
    assert view["requests_done"] == 5 and view["errors"] == 0, view

    records = hostile_stack.client.get(f"/v1/runs/{run_id}/records?format=parquet")
    assert records.status_code == 200
    table = pq.read_table(io.BytesIO(records.content))
    assert table.num_rows == 5
    for row in table.to_pylist():
        assert row["status"] == "ok"
        assert row["token_count_source"] == "events"
        assert row["completion_tokens"] == row["token_events"] == 2
        # Not the planned length recorded as if the server had said it: unknown.
        assert row["prompt_tokens"] is None and row["prompt_count_source"] is None
        assert row["finish_reason"] == "stop"
    hostile_stack.assert_healthy()


def test_an_error_body_echoing_secrets_is_stored_and_shown_redacted(
    hostile_stack: HostileStack, catcher: Catcher
) -> None:
    # A provider's error answer is text it chose: keys it echoes, a signed URL, a request
    # id, a terminal escape sequence and markup must neither be stored nor shown as sent.
    body = (
        '{"error": "invalid key sk-live-0123456789abcdefXYZ for Bearer eyJhbGciOi.eyJzdWIi.sig'
        " at https://u:pw@files.example/blob?X-Amz-Signature=deadbeef request 88442211"
        ' \u001b[2J<script>alert(1)</script>"}'
    ).encode()
    catcher.answer("/chat/completions", body, status=401)
    provider = {"name": "echo", "kind": "openai", "base_url": f"{catcher.url}/v1", "model": "m"}
    created = hostile_stack.client.post(
        "/v1/runs", json={"scenario": scenario_with(provider, requests=5)}
    )
    assert created.status_code == 201, created.text
    run_id = created.json()["id"]
    assert hostile_stack.wait_for_run(run_id)["errors"] == 5

    expected = (
        'HTTP 401: {"error": "invalid key [redacted] for Bearer [redacted] at '
        'https://[redacted]@files.example/blob?[redacted] request <n> [2J<script>alert(1)</script>"}'
    )
    records = hostile_stack.client.get(f"/v1/runs/{run_id}/records?format=parquet")
    stored = {
        row["error_message"] for row in pq.read_table(io.BytesIO(records.content)).to_pylist()
    }
    assert stored == {expected}
    report = hostile_stack.client.get(f"/v1/runs/{run_id}/report").json()
    assert [(e["error_class"], e["message"], e["count"]) for e in report["errors"]] == [
        ("http_4xx", expected, 5)
    ]
    html = hostile_stack.client.get(f"/v1/runs/{run_id}/report", params={"format": "html"}).text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert(1)" not in html
    for secret in ("sk-live-0123456789abcdefXYZ", "eyJhbGciOi", ":pw@", "deadbeef", "88442211"):
        assert secret not in records.content.decode("latin-1") and secret not in html
    hostile_stack.assert_healthy()
