"""The llama.cpp ``/completion`` body: the planned length as n_predict, ignore_eos to keep
it, extra fields merged."""

from __future__ import annotations

import orjson

from workers.client.adapters.llamacpp import completion_body
from workers.prompts.plan import PlannedRequest


def test_completion_body_with_and_without_the_length_knobs() -> None:
    request = PlannedRequest(0, 5, 32, "Once upon a time")
    assert orjson.loads(completion_body(request, cache_prompt=False)) == {
        "prompt": "Once upon a time",
        "n_predict": 32,
        "stream": True,
        "cache_prompt": False,
    }
    forced = orjson.loads(
        completion_body(request, True, enforce_output_length=True, extra_body={"samplers": ["k"]})
    )
    assert (forced["ignore_eos"], forced["cache_prompt"], forced["samplers"]) == (
        True,
        True,
        ["k"],
    )
    assert "min_tokens" not in forced  # llama-server has none; n_predict is the length
