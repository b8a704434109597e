"""The Messages API parser on Anthropic's documented event sequences (recorded in
tests/data/providers/anthropic), fed whole and cut into 1- and 7-byte chunks, and the
request body and headers the adapter sends."""

from __future__ import annotations

import orjson
import pytest

from tests.support.paths import PROVIDER_DATA
from workers.client.adapters.anthropic import (
    AnthropicParser,
    anthropic_headers,
    anthropic_tool_choice,
    messages_body,
)
from workers.client.errors import IncompleteAnswer, RequestFailure
from workers.client.result import RequestResult
from workers.client.server_ids import note_response
from workers.prompts.plan import PlannedRequest, ToolSet


def run(name: str, size: int | None, headers: dict[str, str] | None = None) -> RequestResult:
    body = (PROVIDER_DATA / "anthropic" / name).read_bytes()
    result = RequestResult(intended_start=0)
    parser = AnthropicParser(result)
    note_response(result, headers or {})  # as measure_stream does for every dialect
    chunks = [body] if size is None else [body[i : i + size] for i in range(0, len(body), size)]
    for stamp, chunk in enumerate(chunks, start=1):
        parser.feed(chunk, stamp)
    parser.finish(len(chunks) + 1)
    return result


@pytest.mark.parametrize("size", [None, 1, 7])
def test_thinking_then_text_with_cache_usage(size: int | None) -> None:
    result = run("stream.sse", size, {"request-id": "req_011CSHoEeqs5C35K2UUqR7Fy"})
    # One thinking delta (reasoning) and two text deltas; the signature is no token.
    assert len(result.token_stamps) == 3
    assert result.first_token == result.token_stamps[0]
    assert result.first_output_token == result.token_stamps[1]
    if size is not None:  # in separate chunks, the thinking delta came first
        assert result.first_token < result.first_output_token  # type: ignore[operator]
    # input 4 + cache read 6 + cache write 2: the whole prompt, as other dialects count it.
    assert (result.prompt_tokens, result.cached_tokens, result.cache_write_tokens) == (12, 6, 2)
    assert (result.completion_tokens, result.token_count_source) == (9, "usage")
    assert result.reasoning_tokens is None  # usage does not split thinking out: unknown
    assert result.finish_reason == "length"  # max_tokens
    assert result.response_id == "msg_01XFDUDYJgAACzvnptvVoYEL"
    assert result.server_request_id == "req_011CSHoEeqs5C35K2UUqR7Fy"


@pytest.mark.parametrize("size", [None, 7])
def test_tool_use_block_is_a_tool_call_streamed_as_json_deltas(size: int | None) -> None:
    result = run("tool.sse", size)
    # text, the tool_use start (its name), two non-empty input_json_delta pieces
    assert len(result.token_stamps) == 4
    assert (result.tool_calls, result.tool_call_at) == (1, result.token_stamps[1])
    assert result.finish_reason == "tool_calls"
    assert (result.prompt_tokens, result.completion_tokens) == (472, 89)
    assert result.cached_tokens is None and result.cache_write_tokens is None  # not sent
    assert result.server_request_id is None  # no header: unknown


def test_overloaded_error_event_is_a_5xx_failure() -> None:
    with pytest.raises(RequestFailure) as caught:
        run("midstream-error.sse", 5)
    assert (caught.value.error_class, caught.value.http_status) == ("http_5xx", 529)
    assert "overloaded_error" in caught.value.message


def test_a_stream_cut_before_message_delta_is_incomplete() -> None:
    body = (PROVIDER_DATA / "anthropic/stream.sse").read_bytes()
    result = RequestResult(intended_start=0)
    parser = AnthropicParser(result)
    parser.feed(body[: body.index(b"event: message_delta")], 1)
    with pytest.raises(IncompleteAnswer, match="without its message_stop"):
        parser.finish(2)


def test_body_carries_system_tools_and_the_planned_length() -> None:
    tools = ToolSet(
        [
            {
                "type": "function",
                "function": {"name": "get_weather", "parameters": {"type": "object"}},
            }
        ],
        {"type": "function", "function": {"name": "get_weather"}},
    )
    request = PlannedRequest(
        0, 5, 32, "hi", messages=(("system", "be brief"), ("user", "hi")), tools=tools
    )
    body = orjson.loads(messages_body("claude-x", request, {"thinking": {"type": "enabled"}}))
    assert body["model"] == "claude-x" and body["max_tokens"] == 32 and body["stream"] is True
    assert body["system"] == "be brief"
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert body["tools"][0]["name"] == "get_weather" and "input_schema" in body["tools"][0]
    assert body["tool_choice"] == {"type": "tool", "name": "get_weather"}
    assert body["thinking"] == {"type": "enabled"}
    assert anthropic_tool_choice("required") == {"type": "any"}
    assert anthropic_tool_choice("auto") == {"type": "auto"}


def test_key_goes_in_x_api_key_with_the_version_and_never_as_a_bearer() -> None:
    headers = anthropic_headers("sk-ant-secret", "2023-06-01")
    assert headers["x-api-key"] == "sk-ant-secret"
    assert headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in headers
    assert "x-api-key" not in anthropic_headers(None, "2023-06-01")
