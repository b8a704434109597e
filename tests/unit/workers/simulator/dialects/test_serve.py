"""The simulator's hosted-API dialects, end to end in memory: what each encoder writes is
read back by the client's parser of that dialect (so the simulator speaks what the
adapters understand), and each dialect reads the adapter's own request body back as the
chat request the simulator's model serves."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import orjson
import pytest

from workers.client.adapters.anthropic import AnthropicParser, messages_body
from workers.client.adapters.gemini import GeminiParser, generate_content_body
from workers.client.adapters.openai_responses import ResponsesParser, responses_body
from workers.client.result import RequestResult
from workers.client.streaming import StreamParser
from workers.prompts.plan import PlannedRequest, ToolSet
from workers.simulator.dialects import anthropic, dialect_of, gemini, openai_responses
from workers.simulator.dialects.serve import ArgumentPieces, Dialect


@dataclass
class Prompt:
    tokens: int
    cached: int


DIALECTS: dict[str, tuple[Dialect, Callable[[RequestResult], StreamParser]]] = {
    "anthropic": (anthropic.DIALECT, AnthropicParser),
    "openai-responses": (openai_responses.DIALECT, ResponsesParser),
    "gemini": (gemini.DIALECT, GeminiParser),
}


def answer(name: str, tool: str | None, cache: bool, emissions: list[int]) -> RequestResult:
    dialect, parser_of = DIALECTS[name]
    encoder = dialect.encoder("sim-model", tool, 7, cache)
    prompt = Prompt(tokens=10, cached=4)
    text = encoder.start(prompt)
    produced, total = 0, sum(emissions)
    for count in emissions:
        text += encoder.tokens(count, last=produced + count >= total)
        produced += count
    text += encoder.end(prompt, produced)
    result = RequestResult(intended_start=0)
    parser = parser_of(result)
    for stamp, line in enumerate(text.encode().splitlines(keepends=True), start=1):
        parser.feed(line, stamp)
    parser.finish(10_000)
    return result


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_a_text_answer_reads_back_with_its_counts_and_cache(name: str) -> None:
    result = answer(name, None, True, [1, 2, 1])
    assert len(result.token_stamps) == 3
    assert result.first_output_token == result.first_token == result.token_stamps[0]
    assert result.finish_reason == "length"  # the simulator always fills the length
    assert (result.prompt_tokens, result.completion_tokens) == (10, 4)
    assert result.cached_tokens == 4
    assert result.response_id is not None and "7" in result.response_id
    assert result.tool_calls == 0


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_without_a_prefix_cache_the_cached_count_is_unknown(name: str) -> None:
    assert answer(name, None, False, [2, 2]).cached_tokens is None


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_a_tool_call_reads_back_as_one_call(name: str) -> None:
    result = answer(name, "lookup", False, [1, 2, 3])
    assert (result.tool_calls, result.finish_reason) == (1, "tool_calls")
    assert result.tool_call_at == result.token_stamps[0]
    assert result.completion_tokens == 6


def test_tool_call_arguments_parse_when_joined() -> None:
    pieces = ArgumentPieces()
    joined = pieces.piece(1, False) + pieces.piece(3, True)
    assert orjson.loads(joined) == {"query": "tok tok tok tok "}
    assert pieces.closed


TOOLS = ToolSet([{"type": "function", "function": {"name": "lookup"}}], "required")
REQUEST = PlannedRequest(
    0, 5, 12, "", messages=(("system", "be brief"), ("user", "one two three")), tools=TOOLS
)
BODIES = {
    "anthropic": (messages_body("m", REQUEST), ""),
    "openai-responses": (responses_body("m", REQUEST), ""),
    "gemini": (generate_content_body(REQUEST), "alt=sse"),
}


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_each_adapters_body_reads_as_the_chat_request_it_stands_for(name: str) -> None:
    body, query = BODIES[name]
    chat = DIALECTS[name][0].as_chat(orjson.loads(body), query)
    assert chat["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "one two three"},
    ]
    assert (chat["max_tokens"], chat["stream"]) == (12, True)
    assert chat["tools"] == [{"type": "function", "function": {"name": "lookup"}}]
    assert chat["tool_choice"] == "required"


def test_gemini_streams_only_with_alt_sse() -> None:
    body, _ = BODIES["gemini"]
    assert gemini.DIALECT.as_chat(orjson.loads(body), "")["stream"] is False


@pytest.mark.parametrize(
    ("method", "path", "name"),
    [
        ("POST", "/v1/messages", "anthropic"),
        ("POST", "/v1/responses", "openai-responses"),
        ("POST", "/v1beta/models/gemini-2.5-flash:streamGenerateContent", "gemini"),
        ("GET", "/v1/messages", None),
        ("POST", "/v1beta/models/:streamGenerateContent", None),
        ("POST", "/v1beta/models/a/b:streamGenerateContent", None),
        ("POST", "/v1beta/models/m:generateContent", None),
    ],
)
def test_routes(method: str, path: str, name: str | None) -> None:
    found = dialect_of(method, path)
    assert (None if found is None else found.name) == name


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_error_bodies_are_json_in_the_dialects_shape(name: str) -> None:
    error = orjson.loads(DIALECTS[name][0].error(429, "simulated error"))
    assert "error" in error
