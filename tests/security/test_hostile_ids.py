"""A provider that answers with hostile ids and timing headers: every request is still
recorded, ids are cut to what joins, and timings that are not timings are unknown.

The endpoint a run measures is chosen by a submitter, so what it says about itself (the
stream's ``id``, a request id header, TGI's ``x-queue-time``) is input like its token
counts (tests/security/test_hostile_provider.py): a huge id must not grow records, a
control character must not reach the store, and a negative, huge or non-numeric timing
must neither fail the request nor be recorded (docs/metrics.md, "Response and request
ids", "Server timings in the response").
"""

from __future__ import annotations

import io
import json

import pyarrow.parquet as pq
import pytest

from tests.fakes.catcher import Catcher
from tests.security.conftest import HostileStack, scenario_with
from workers.client.server_ids import MAX_ID_CHARS

pytestmark = pytest.mark.integration


def _chat(stream_id: object) -> bytes:
    events = [
        {"id": stream_id, "choices": [{"index": 0, "delta": {"role": "assistant"}}]},
        {"id": "later", "choices": [{"index": 0, "delta": {"content": " a"}}]},
        {"id": "later", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
         "usage": {"prompt_tokens": 4, "completion_tokens": 1}},
    ]  # fmt: skip
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    return body + b"data: [DONE]\n\n"


TGI = (
    b'data:{"index":1,"token":{"id":1,"text":" a","logprob":0,"special":false},'
    b'"generated_text":null,"details":null}\n\n'
    b'data:{"index":2,"token":{"id":2,"text":" b","logprob":0,"special":false},'
    b'"generated_text":" a b","details":{"finish_reason":"length","generated_tokens":2,'
    b'"input_length":4}}\n\n'
)


def _records(stack: HostileStack, provider: dict[str, object]) -> list[dict[str, object]]:
    created = stack.client.post("/v1/runs", json={"scenario": scenario_with(provider, requests=3)})
    assert created.status_code == 201, created.text
    run_id = created.json()["id"]
    view = stack.wait_for_run(run_id)
    assert view["state"] == "finished", view
    assert view["requests_done"] == 3 and view["errors"] == 0, view
    records = stack.client.get(f"/v1/runs/{run_id}/records?format=parquet")
    assert records.status_code == 200
    report = stack.client.get(f"/v1/runs/{run_id}/report")
    assert report.status_code == 200
    sections = {section["key"]: section for section in report.json()["sections"]}
    # The worker pre-warms its connections: every request reused one it did not open.
    (row,) = sections["connections"]["rows"]
    assert row[3:5] == [0, 3]
    assert sections["ids"]["rows"][0][3] == 3
    rows: list[dict[str, object]] = pq.read_table(io.BytesIO(records.content)).to_pylist()
    assert len(rows) == 3 and {row["status"] for row in rows} == {"ok"}
    return rows


@pytest.mark.parametrize(
    ("stream_id", "header", "expected"),
    [
        ("i" * 100_000, "r" * 8_000, ("i" * MAX_ID_CHARS, "r" * MAX_ID_CHARS)),
        # control characters, a blank header: not ids (the next chunk's id is taken)
        ("bad\u0000id\u001b[2J", " ", ("later", None)),
        ({"nested": ["object"]}, "ok-id", ("later", "ok-id")),
        (-1, "ok-id", ("later", "ok-id")),
    ],
    ids=["huge", "control", "object", "number"],
)
def test_hostile_ids_are_cut_or_unknown_and_nothing_is_lost(
    hostile_stack: HostileStack,
    catcher: Catcher,
    stream_id: object,
    header: str,
    expected: tuple[str | None, str | None],
) -> None:
    catcher.answer(
        "/chat/completions",
        _chat(stream_id),
        content_type="text/event-stream",
        headers={"x-request-id": header},
    )
    provider = {"name": "ids", "kind": "openai", "base_url": f"{catcher.url}/v1", "model": "m"}
    rows = _records(hostile_stack, provider)
    # The first chunk's id that is an id is the response's.
    assert {(row["response_id"], row["server_request_id"]) for row in rows} == {expected}
    hostile_stack.assert_healthy()


@pytest.mark.parametrize(
    "queue_time",
    ["-5", "99999999999999999999999", "abc", "1.5", "1e9", "\u00b2"],  # ² is a digit, not ASCII
)
def test_hostile_tgi_timings_are_unknown_not_errors(
    hostile_stack: HostileStack, catcher: Catcher, queue_time: str
) -> None:
    catcher.answer(
        "/generate_stream",
        TGI,
        content_type="text/event-stream",
        headers={"x-queue-time": queue_time, "x-inference-time": queue_time},
    )
    provider = {"name": "tgi", "kind": "tgi", "base_url": catcher.url, "model": "m"}
    for row in _records(hostile_stack, provider):
        assert row["server_queue_ns"] is None and row["server_timing_source"] is None
        assert row["completion_tokens"] == 2
    hostile_stack.assert_healthy()
