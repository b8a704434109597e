"""The Gemini ``streamGenerateContent?alt=sse`` parser on the documented response shapes
(recorded in tests/data/providers/gemini), and the request body and headers."""

from __future__ import annotations

import orjson
import pytest

from tests.support.paths import PROVIDER_DATA
from workers.client.adapters.gemini import (
    GeminiParser,
    gemini_headers,
    gemini_tool_config,
    generate_content_body,
)
from workers.client.errors import IncompleteAnswer, RequestFailure
from workers.client.result import RequestResult
from workers.prompts.plan import PlannedRequest, ToolSet


def run(name: str, size: int | None) -> RequestResult:
    body = (PROVIDER_DATA / "gemini" / name).read_bytes()
    result = RequestResult(intended_start=0)
    parser = GeminiParser(result)
    chunks = [body] if size is None else [body[i : i + size] for i in range(0, len(body), size)]
    for stamp, chunk in enumerate(chunks, start=1):
        parser.feed(chunk, stamp)
    parser.finish(len(chunks) + 1)
    return result


@pytest.mark.parametrize("size", [None, 1, 7])
def test_thought_then_text_with_cached_and_thought_tokens(size: int | None) -> None:
    result = run("stream.sse", size)
    assert len(result.token_stamps) == 3  # a thought part, two text parts
    assert result.first_token == result.token_stamps[0]
    assert result.first_output_token == result.token_stamps[1]
    # promptTokenCount includes the cached tokens; output = candidates 3 + thoughts 28
    assert (result.prompt_tokens, result.cached_tokens) == (10, 4)
    assert (result.completion_tokens, result.reasoning_tokens) == (31, 28)
    assert result.finish_reason == "length"  # MAX_TOKENS
    assert result.response_id == "mKqKaMe8Ke2Ux_APjZCq-QI"
    assert result.server_request_id is None  # Gemini names no request-id header: unknown
    assert result.cache_write_tokens is None


def test_a_whole_function_call_part_is_one_tool_call() -> None:
    result = run("tool.sse", None)
    assert len(result.token_stamps) == 1
    assert (result.tool_calls, result.tool_call_at) == (1, result.token_stamps[0])
    assert result.finish_reason == "tool_calls"  # STOP after a function call
    assert (result.prompt_tokens, result.completion_tokens) == (52, 16)
    assert result.reasoning_tokens is None and result.cached_tokens is None


def test_error_object_mid_stream_is_classified_by_its_code() -> None:
    with pytest.raises(RequestFailure) as caught:
        run("midstream-error.sse", 11)
    assert (caught.value.error_class, caught.value.http_status) == ("http_5xx", 503)
    assert "UNAVAILABLE" in caught.value.message


def test_a_stream_without_a_finish_reason_is_incomplete() -> None:
    body = (PROVIDER_DATA / "gemini/stream.sse").read_bytes()
    parser = GeminiParser(RequestResult(intended_start=0))
    parser.feed(body[: body.rindex(b"data:")], 1)
    with pytest.raises(IncompleteAnswer, match="finishReason"):
        parser.finish(2)


def test_a_blocked_prompt_is_content_filter() -> None:
    result = RequestResult(intended_start=0)
    parser = GeminiParser(result)
    parser.feed(b'data: {"promptFeedback": {"blockReason": "SAFETY"}}\n\n', 1)
    parser.finish(2)
    assert result.finish_reason == "content_filter" and not result.token_stamps


def test_body_and_key_header() -> None:
    tools = ToolSet([{"type": "function", "function": {"name": "f"}}], "auto")
    request = PlannedRequest(
        0, 5, 24, "hi", messages=(("system", "sys"), ("user", "a"), ("assistant", "b")), tools=tools
    )
    body = orjson.loads(
        generate_content_body(request, True, {"generationConfig": {"temperature": 0}})
    )
    assert body["generationConfig"] == {
        "maxOutputTokens": 24,
        "thinkingConfig": {"includeThoughts": True},
        "temperature": 0,
    }
    assert [c["role"] for c in body["contents"]] == ["user", "model"]
    assert body["systemInstruction"] == {"parts": [{"text": "sys"}]}
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {"name": "f", "description": "", "parameters": {"type": "object"}}
            ]
        }
    ]
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO"}}
    assert gemini_tool_config({"type": "function", "function": {"name": "f"}}) == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["f"]}
    }
    assert gemini_headers("AIza-secret")["x-goog-api-key"] == "AIza-secret"
    assert "x-goog-api-key" not in gemini_headers(None)
