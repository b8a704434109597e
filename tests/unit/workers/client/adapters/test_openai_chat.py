"""The OpenAI chat request body: captured messages and the output-length knobs."""

from __future__ import annotations

import orjson

from workers.client.adapters.openai_chat import chat_body
from workers.prompts.plan import PlannedRequest


def test_chat_body_sends_captured_messages_and_length_knobs() -> None:
    request = PlannedRequest(0, 5, 32, "ignored", (("system", "be brief"), ("user", "hi")))
    body = orjson.loads(
        chat_body("m", request, enforce_output_length=True, extra_body={"top_p": 0.9})
    )
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]
    assert (body["max_tokens"], body["min_tokens"], body["ignore_eos"], body["top_p"]) == (
        32,
        32,
        True,
        0.9,
    )
    plain = orjson.loads(chat_body("m", PlannedRequest(1, 3, 8, "a b c")))
    assert plain["messages"] == [{"role": "user", "content": "a b c"}]
    assert "ignore_eos" not in plain and plain["stream_options"] == {"include_usage": True}
