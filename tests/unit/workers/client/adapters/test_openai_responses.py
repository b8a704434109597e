"""The Responses API parser on OpenAI's documented event sequences (recorded in
tests/data/providers/openai-responses), and the request body the adapter sends."""

from __future__ import annotations

import orjson
import pytest

from tests.support.paths import PROVIDER_DATA
from workers.client.adapters.openai_responses import (
    ResponsesParser,
    responses_body,
    responses_tool_choice,
)
from workers.client.errors import IncompleteAnswer, RequestFailure
from workers.client.result import RequestResult
from workers.client.server_ids import note_response
from workers.prompts.plan import PlannedRequest, ToolSet


def run(name: str, size: int | None, headers: dict[str, str] | None = None) -> RequestResult:
    body = (PROVIDER_DATA / "openai-responses" / name).read_bytes()
    result = RequestResult(intended_start=0)
    parser = ResponsesParser(result)
    note_response(result, headers or {})  # as measure_stream does for every dialect
    chunks = [body] if size is None else [body[i : i + size] for i in range(0, len(body), size)]
    for stamp, chunk in enumerate(chunks, start=1):
        parser.feed(chunk, stamp)
    parser.finish(len(chunks) + 1)
    return result


@pytest.mark.parametrize("size", [None, 1, 7])
def test_reasoning_summary_then_text_with_cached_and_reasoning_tokens(size: int | None) -> None:
    result = run("stream.sse", size, {"x-request-id": "req_7a1b2c3d"})
    assert len(result.token_stamps) == 3  # one reasoning summary delta, two text deltas
    assert result.first_token == result.token_stamps[0]
    assert result.first_output_token == result.token_stamps[1]
    assert (result.prompt_tokens, result.completion_tokens) == (1290, 22)
    assert (result.cached_tokens, result.reasoning_tokens) == (1152, 16)
    assert result.cache_write_tokens is None  # the Responses API does not say: unknown
    assert result.finish_reason == "stop"
    assert result.response_id == "resp_68af4030592c81938ec0a5fbab4a3e9f05438e46b5f69a3b"
    assert result.server_request_id == "req_7a1b2c3d"


def test_function_call_item_and_argument_deltas_are_one_tool_call() -> None:
    result = run("tool.sse", 7)
    assert len(result.token_stamps) == 3  # the item (its name) and two argument pieces
    assert (result.tool_calls, result.tool_call_at) == (1, result.token_stamps[0])
    assert result.finish_reason == "tool_calls"
    assert (result.prompt_tokens, result.completion_tokens, result.cached_tokens) == (291, 23, 0)


def test_incomplete_at_max_output_tokens_is_length() -> None:
    result = run("incomplete.sse", None)
    assert (result.finish_reason, result.completion_tokens) == ("length", 2)


def test_failed_response_is_a_classified_failure() -> None:
    with pytest.raises(RequestFailure) as caught:
        run("midstream-error.sse", 3)
    assert (caught.value.error_class, caught.value.http_status) == ("http_5xx", 500)
    assert "server_error" in caught.value.message


def test_error_event_with_a_rate_limit_code_is_a_429() -> None:
    result = RequestResult(intended_start=0)
    parser = ResponsesParser(result)
    event = (
        b'event: error\ndata: {"type":"error","code":"rate_limit_exceeded","message":"slow"}\n\n'
    )
    with pytest.raises(RequestFailure) as caught:
        parser.feed(event, 1)
    assert (caught.value.error_class, caught.value.http_status) == ("http_429", 429)


def test_a_stream_without_its_terminal_event_is_incomplete() -> None:
    body = (PROVIDER_DATA / "openai-responses/stream.sse").read_bytes()
    parser = ResponsesParser(RequestResult(intended_start=0))
    parser.feed(body[: body.index(b"event: response.completed")], 1)
    with pytest.raises(IncompleteAnswer):
        parser.finish(2)


def test_body_is_an_unstored_stream_of_the_planned_length() -> None:
    tools = ToolSet([{"type": "function", "function": {"name": "f"}}], "required")
    request = PlannedRequest(
        0, 5, 40, "hi", messages=(("system", "sys"), ("user", "hi")), tools=tools
    )
    body = orjson.loads(responses_body("gpt-x", request, {"reasoning": {"summary": "auto"}}))
    assert (body["model"], body["max_output_tokens"], body["stream"], body["store"]) == (
        "gpt-x",
        40,
        True,
        False,
    )
    assert body["instructions"] == "sys"
    assert body["input"] == [{"role": "user", "content": "hi"}]
    assert body["tools"][0]["type"] == "function" and body["tools"][0]["name"] == "f"
    assert body["tool_choice"] == "required"
    assert body["reasoning"] == {"summary": "auto"}
    assert responses_tool_choice({"type": "function", "function": {"name": "f"}}) == {
        "type": "function",
        "name": "f",
    }
