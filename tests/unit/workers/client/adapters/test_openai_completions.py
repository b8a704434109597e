"""The completions request body: usage asked for, and the output-length knobs."""

from __future__ import annotations

import orjson

from workers.client.adapters.openai_completions import completions_body
from workers.prompts.plan import PlannedRequest


def test_completions_body_with_and_without_the_length_knobs() -> None:
    request = PlannedRequest(0, 5, 32, "Once upon a time")
    plain = orjson.loads(completions_body("m", request))
    assert plain == {
        "model": "m",
        "prompt": "Once upon a time",
        "max_tokens": 32,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    forced = orjson.loads(
        completions_body("m", request, enforce_output_length=True, extra_body={"top_p": 0.9})
    )
    assert (forced["ignore_eos"], forced["min_tokens"], forced["top_p"]) == (True, 32, 0.9)
