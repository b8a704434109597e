"""Image tokens from usage: ``prompt_tokens_details.image_tokens`` where a server splits
the prompt by modality; cached tokens are not image tokens."""

from __future__ import annotations

import orjson

from workers.client.chat_stream import ChatStream
from workers.client.result import RequestResult


def _usage(usage: dict[str, object]) -> RequestResult:
    result = RequestResult(intended_start=0, sent=0)
    stream = ChatStream(result)
    finish = {"index": 0, "delta": {}, "finish_reason": "stop"}
    stream.on_payload(orjson.dumps({"choices": [finish]}), 4)
    stream.on_payload(orjson.dumps({"choices": [], "usage": usage}), 5)
    stream.finish()
    return result


def test_reported_image_tokens_are_kept() -> None:
    result = _usage(
        {
            "prompt_tokens": 300,
            "completion_tokens": 4,
            "prompt_tokens_details": {"image_tokens": 255, "text_tokens": 45},
        }
    )
    assert (result.prompt_tokens, result.image_prompt_tokens) == (300, 255)


def test_cached_tokens_or_no_details_leave_image_tokens_unknown() -> None:
    cached = _usage(
        {"prompt_tokens": 9, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 8}}
    )
    assert cached.prompt_tokens == 9 and cached.image_prompt_tokens is None
    hostile = _usage(
        {"prompt_tokens": 9, "completion_tokens": 1, "prompt_tokens_details": {"image_tokens": "x"}}
    )
    assert hostile.image_prompt_tokens is None
