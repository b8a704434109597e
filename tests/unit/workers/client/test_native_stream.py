"""What the hosted dialects' parsers share: token events, tool calls counted by key and
bounded, ids bounded, unknown counts left unknown, the planned conversation split."""

from __future__ import annotations

import pytest

from workers.client.errors import IncompleteAnswer
from workers.client.native_stream import (
    MAX_TOOL_CALLS,
    NativeStream,
    conversation,
    event_failure,
)
from workers.client.result import AnswerText, RequestResult
from workers.client.server_ids import MAX_ID_CHARS, clean_id
from workers.client.streaming import counted
from workers.prompts.plan import PlannedRequest


def test_reasoning_then_output_text_and_the_answer_kept() -> None:
    result = RequestResult(intended_start=0, answer=AnswerText(100))
    stream = NativeStream(result)
    assert not stream.text(1, "", output=True)  # an empty piece is no token
    assert stream.text(2, "thinking...", output=False)
    assert stream.text(3, "Hello", output=True)
    assert (result.first_token, result.first_output_token) == (2, 3)
    assert list(result.token_stamps) == [2, 3]
    assert result.answer is not None and result.answer.text() == "Hello"


def test_tool_calls_are_counted_by_key_and_bounded() -> None:
    result = RequestResult(intended_start=0)
    stream = NativeStream(result)
    stream.tool_call(5, "a")
    stream.tool_call(6, "a", '{"x":')
    assert not stream.tool_call(7, "a", "")  # an empty piece is nothing
    assert (result.tool_calls, result.tool_call_at, len(result.token_stamps)) == (1, 5, 2)
    for key in range(MAX_TOOL_CALLS + 10):
        stream.tool_call(8, key, emit=False)
    assert result.tool_calls == MAX_TOOL_CALLS


def test_finish_needs_a_reason_and_keeps_unknown_prompt_counts_unknown() -> None:
    result = RequestResult(intended_start=0)
    stream = NativeStream(result)
    stream.text(1, "a", output=True)
    with pytest.raises(IncompleteAnswer, match="without its end"):
        stream.finish("end")
    stream.finished = "stop"
    stream.finish("end")
    assert (result.prompt_tokens, result.completion_tokens, result.token_count_source) == (
        None,
        1,
        "events",
    )


def test_headers_ids_and_counts_are_bounded_server_text() -> None:
    result = RequestResult(intended_start=0)
    stream = NativeStream(result)
    stream.response_id("r" * 1000)
    assert result.response_id == "r" * MAX_ID_CHARS
    result.response_id = None
    stream.response_id("first")
    stream.response_id("second")
    assert result.response_id == "first"
    assert clean_id(42) is None and clean_id("") is None
    assert [counted(v) for v in (3, -1, True, "3", None)] == [3, None, None, None, None]
    stream.cache(-5, "x")
    assert (result.cached_tokens, result.cache_write_tokens) == (None, None)


def test_event_failure_classes() -> None:
    assert event_failure(529, "overloaded_error", "busy").error_class == "http_5xx"
    assert event_failure(429, "rate_limit_error", "slow").error_class == "http_429"


def test_conversation_splits_system_text_out() -> None:
    assert conversation(PlannedRequest(0, 1, 1, "hello")) == (None, [("user", "hello")])
    request = PlannedRequest(
        0, 1, 1, "", messages=(("system", "a"), ("user", "b"), ("assistant", "c"), ("system", "d"))
    )
    assert conversation(request) == ("a\n\nd", [("user", "b"), ("assistant", "c")])
