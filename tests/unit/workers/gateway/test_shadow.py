"""What a shadow provider is sent for one sampled live request."""

from __future__ import annotations

from typing import Any

import orjson

from scenarios.wire.contract import ShadowTask
from workers.gateway.shadow import flat_messages, shadow_body


def task(**fields: Any) -> ShadowTask:
    return ShadowTask.model_validate(
        {
            "run_id": "sess",
            "request_key": "k1",
            "seq": 3,
            "messages": [{"role": "user", "content": "hi"}],
            "prompt_tokens": 1,
            "providers": [{"name": "cand", "kind": "simulated"}],
            **fields,
        }
    )


def test_body_keeps_the_clients_conversation_and_parameters_with_the_shadows_model() -> None:
    messages = [{"role": "system", "content": "terse"}, {"role": "user", "content": "hi"}]
    body = orjson.loads(
        shadow_body(
            "cand-model",
            task(messages=messages, max_tokens=64, params={"temperature": 0.2, "stream": False}),
        )
    )
    assert body["model"] == "cand-model" and body["messages"] == messages
    assert body["temperature"] == 0.2 and body["max_tokens"] == 64
    # Always a measured stream with usage, whatever the client asked for.
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_body_without_a_bound_sets_none() -> None:
    assert "max_tokens" not in orjson.loads(shadow_body("m", task()))


def test_flat_messages_keep_the_text_of_multi_part_content() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "be brief"},
        {
            "content": [
                {"type": "text", "text": "look at"},
                {"type": "image_url"},
                "junk",
                {"text": "this"},
            ]
        },
        {"role": "assistant", "content": None},
    ]
    assert flat_messages(messages) == (
        ("system", "be brief"),
        ("user", "look at  this"),  # the image part has no text: an empty piece
        ("assistant", ""),
    )
