"""Request ids and prompt hashes: what the client records is what the upstream logs."""

from __future__ import annotations

import dataclasses

import orjson

from tests.support.builders import ROW_CONTEXT, timed_result
from workers.client.adapters.openai_chat import chat_body
from workers.client.request_ids import ID_PREFIX, is_request_id, prompt_hash, request_id
from workers.prompts.plan import PlannedRequest
from workers.shard.rows import planned_messages, record_row, tagged
from workers.simulator import server as simulator_server

TAGGING = dataclasses.replace(ROW_CONTEXT, tag_requests=True)


def test_ids_are_unique_per_shard_attempt_and_seq() -> None:
    ids = {
        request_id(shard, attempt, seq)
        for shard in ("s0.a.x", "s1.a.x")
        for attempt in (1, 2)
        for seq in range(3)
    }
    assert len(ids) == 12 and all(is_request_id(i) for i in ids)
    assert not is_request_id("alice") and not is_request_id(None)
    assert not is_request_id(ID_PREFIX + "x" * 200)


def test_a_failover_run_sends_and_records_the_id_and_hash() -> None:
    request = PlannedRequest(7, 10, 5, "some prompt words")
    sent = tagged(TAGGING, request)
    assert sent.request_id == request_id("s0.a.local", 1, 7)
    body = orjson.loads(chat_body("m", sent))
    assert body["user"] == sent.request_id
    # A user the scenario sets itself is kept.
    assert orjson.loads(chat_body("m", sent, extra_body={"user": "me"}))["user"] == "me"
    row = record_row(TAGGING, request, timed_result(0, 10, [1.0]))
    assert row["client_request_id"] == sent.request_id
    # The upstream hashes the messages of the JSON it received: the same value.
    received = [(m["role"], simulator_server._content_text(m)) for m in body["messages"]]
    assert row["prompt_hash"] == prompt_hash(received)


def test_other_runs_send_and_record_nothing_new() -> None:
    request = PlannedRequest(7, 10, 5, "p")
    assert tagged(ROW_CONTEXT, request) is request
    assert "user" not in orjson.loads(chat_body("m", request))
    row = record_row(ROW_CONTEXT, request, timed_result(0, 10, [1.0]))
    assert row["client_request_id"] is None and row["prompt_hash"] is None


def test_a_conversation_hashes_every_message() -> None:
    convo = PlannedRequest(0, 10, 5, "x", messages=(("system", "be brief"), ("user", "hi")))
    assert planned_messages(convo) == [("system", "be brief"), ("user", "hi")]
    assert prompt_hash(planned_messages(convo)) != prompt_hash([("user", "hi")])
    assert prompt_hash([("user", "ab")]) != prompt_hash([("user", "a"), ("b", "")])
