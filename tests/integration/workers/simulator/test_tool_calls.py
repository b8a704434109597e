"""The simulator answers requests carrying tools with a streamed tool call as OpenAI does
(deltas under one index, arguments split over events, finish_reason ``tool_calls``), and
the official ``openai`` client parses it: its accumulated arguments are valid JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai
import pytest

from scenarios.workload.tools import generated_tool

pytestmark = pytest.mark.integration

TOOLS = [generated_tool(0), generated_tool(1)]
MESSAGES: list[Any] = [{"role": "user", "content": "find the records"}]


Start = Callable[..., str]


def _client(base: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base, api_key="unused", max_retries=0, timeout=30)


def _stream(base: str, **request: Any) -> tuple[list[Any], str | None, Any]:
    """Chunks' tool-call deltas, the finish reason and the usage of one streamed answer."""
    deltas: list[Any] = []
    finish = usage = None
    with _client(base) as client:
        stream = client.chat.completions.create(
            model="simulated",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
            **request,
        )
        for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                if choice.delta.tool_calls:
                    deltas.extend(choice.delta.tool_calls)
                finish = choice.finish_reason or finish
    return deltas, finish, usage


def test_the_openai_client_parses_a_streamed_forced_tool_call(simulate_endpoint: Start) -> None:
    base = simulate_endpoint(ttft_ms=1, itl_ms=1, tokens_per_chunk=2)
    deltas, finish, usage = _stream(
        base,
        max_tokens=9,
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "lookup_1"}},
    )
    assert finish == "tool_calls"
    assert len(deltas) >= 5  # 9 tokens at 2 an event: the arguments come in pieces
    first = deltas[0]
    assert first.index == 0 and first.id and first.type == "function"
    assert first.function is not None and first.function.name == "lookup_1"
    assert all(delta.index == 0 and delta.id is None for delta in deltas[1:])
    arguments = "".join(d.function.arguments or "" for d in deltas if d.function is not None)
    assert set(json.loads(arguments)) == {"query"}
    assert usage is not None and usage.completion_tokens == 9


def test_required_calls_the_first_tool_and_none_answers_text(simulate_endpoint: Start) -> None:
    base = simulate_endpoint(ttft_ms=1, itl_ms=1)
    required, finish, _ = _stream(base, max_tokens=4, tools=TOOLS, tool_choice="required")
    assert finish == "tool_calls"
    assert required[0].function is not None and required[0].function.name == "lookup_0"
    text, finish, _ = _stream(base, max_tokens=4, tools=TOOLS, tool_choice="none")
    assert text == [] and finish == "length"


def test_auto_calls_a_tool_at_the_configured_rate(simulate_endpoint: Start) -> None:
    base = simulate_endpoint(ttft_ms=1, itl_ms=1, tool_call_rate=0.5, seed=7)
    finishes = [_stream(base, max_tokens=2, tools=TOOLS, tool_choice="auto")[1] for _ in range(40)]
    plain = [_stream(base, max_tokens=2)[1] for _ in range(5)]
    calls = finishes.count("tool_calls")
    assert 5 <= calls <= 35, finishes  # ~20 of 40; bounds far outside binomial noise
    assert calls + finishes.count("length") == 40
    assert plain == ["length"] * 5  # no tools, no call, whatever the rate


def test_a_plain_answer_carries_the_whole_call(simulate_endpoint: Start) -> None:
    base = simulate_endpoint(ttft_ms=1, itl_ms=1)
    with _client(base) as client:
        answer = client.chat.completions.create(
            model="simulated", messages=MESSAGES, max_tokens=6, tools=TOOLS, tool_choice="required"
        )
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls or []
    assert len(calls) == 1 and calls[0].type == "function"
    assert json.loads(calls[0].function.arguments)["query"].startswith("tok")
