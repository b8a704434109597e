"""Tool-call deltas in a chat stream (pure logic): output like content, their first stamp
kept, calls counted by distinct index; and workload.tools planning and validation."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from scenarios.limits import MAX_TOOL_DEFINITIONS_BYTES, MAX_TOOLS
from scenarios.workload.spec import Workload
from scenarios.workload.tools import ToolsSpec, generated_tool
from workers.client.adapters.openai_chat import chat_body
from workers.client.chat_stream import ChatStream
from workers.client.errors import ProtocolFailure
from workers.client.result import RequestResult
from workers.client.sse import SSEDecoder
from workers.prompts.plan import request_planner

USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":5}}\n\n'
DONE = b"data: [DONE]\n\n"


def event(delta: dict[str, object], finish: str | None = None) -> bytes:
    body = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def run_stream(chunks: list[tuple[int, bytes]]) -> RequestResult:
    result = RequestResult(intended_start=0, sent=0)
    stream = ChatStream(result)
    decoder = SSEDecoder()
    for stamp, chunk in chunks:
        for payload in decoder.feed(chunk):
            stream.on_payload(payload, stamp)
    stream.finish()
    return result


def call(index: int, arguments: str, name: str | None = None) -> dict[str, Any]:
    function: dict[str, Any] = {"arguments": arguments}
    if name is None:
        return {"index": index, "function": function}
    function["name"] = name
    return {"index": index, "id": f"call_{index}", "type": "function", "function": function}


def test_a_tool_call_delta_is_the_first_token_and_output() -> None:
    result = run_stream(
        [
            (10, event({"role": "assistant", "content": None})),
            (40, event({"tool_calls": [call(0, "", name="lookup_0")]})),
            (55, event({"tool_calls": [call(0, '{"query": "a')]})),
            (70, event({"tool_calls": [call(0, '"}')]})),
            (71, event({}, finish="tool_calls") + USAGE + DONE),
        ]
    )
    assert result.first_token == result.first_output_token == result.tool_call_at == 40
    assert list(result.token_stamps) == [40, 55, 70]
    assert result.tool_calls == 1
    assert result.completion_tokens == 5  # from usage


def test_content_before_a_tool_call_keeps_the_first_token_and_stamps_the_call() -> None:
    result = run_stream(
        [
            (20, event({"content": "Let me look."})),
            (30, event({"tool_calls": [call(0, "{}", name="a"), call(1, "{}", name="b")]})),
            (35, event({"tool_calls": [call(2, "{}", name="c")]}, finish="tool_calls") + DONE),
        ]
    )
    assert result.first_token == 20 and result.tool_call_at == 30
    assert result.tool_calls == 3
    assert result.completion_tokens == 3  # no usage: counted events


def test_a_delta_with_content_and_a_tool_call_is_one_event_of_both() -> None:
    both = {"content": "Checking.", "tool_calls": [call(0, "{}", name="f")]}
    result = run_stream([(9, event(both, finish="tool_calls") + DONE)])
    assert list(result.token_stamps) == [9]
    assert result.first_output_token == result.tool_call_at == 9 and result.tool_calls == 1


def test_calls_without_an_index_count_one_each_and_a_text_answer_has_none() -> None:
    whole = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    result = run_stream(
        [(5, event({"tool_calls": [whole]})), (6, event({"tool_calls": [whole]}, "tool_calls"))]
    )
    assert result.tool_calls == 2 and result.tool_call_at == 5
    text = run_stream([(5, event({"content": "hi"}, finish="stop"))])
    assert text.tool_call_at is None and text.tool_calls == 0


def test_hostile_indices_are_neither_unhashable_nor_unbounded() -> None:
    odd = b'data: {"choices":[{"index":{},"delta":{"tool_calls":[{"index":[1]}]}}]}\n\n'
    many = event({"tool_calls": [call(i, "") for i in range(5000)]}, finish="tool_calls")
    result = run_stream([(3, odd), (4, many)])
    assert result.tool_call_at == 3
    assert result.tool_calls == 1024  # capped


def test_tool_calls_that_are_not_a_list_are_a_protocol_failure() -> None:
    with pytest.raises(ProtocolFailure):
        run_stream([(5, event({"tool_calls": {"index": 0}}))])


def _workload(tools: dict[str, Any]) -> Workload:
    length = {"dist": "fixed", "value": 8}
    return Workload.model_validate(
        {"mix": [{"prompt_tokens": length, "output_tokens": length}], "tools": tools}
    )


def test_a_share_of_requests_carries_the_tools_and_lengths_do_not_change() -> None:
    with_tools = request_planner(_workload({"count": 3, "fraction": 0.5}), 1, 0)
    without = request_planner(_workload({"count": 3, "fraction": 0.0}), 1, 0)
    planned = [with_tools(seq) for seq in range(200)]
    carrying = [request for request in planned if request.tools is not None]
    assert 60 <= len(carrying) <= 140  # ~100 of 200
    assert [r.prompt for r in planned] == [without(seq).prompt for seq in range(200)]
    assert planned == [with_tools(seq) for seq in range(200)]  # deterministic
    body = json.loads(chat_body("m", carrying[0]))
    assert [tool["function"]["name"] for tool in body["tools"]] == [
        "lookup_0",
        "lookup_1",
        "lookup_2",
    ]
    assert body["tool_choice"] == "auto"
    plain = next(request for request in planned if request.tools is None)
    assert "tools" not in json.loads(chat_body("m", plain))


def test_a_forced_function_is_sent_in_openai_shape_and_must_exist() -> None:
    spec = ToolsSpec.model_validate({"count": 2, "tool_choice": {"function": "lookup_1"}})
    assert spec.choice() == {"type": "function", "function": {"name": "lookup_1"}}
    with pytest.raises(ValidationError, match="not a tool"):
        ToolsSpec.model_validate({"count": 2, "tool_choice": {"function": "missing"}})


@pytest.mark.parametrize(
    "tools",
    [
        {},  # neither definitions nor count
        {"count": 1, "definitions": [generated_tool(0)]},  # both
        {"count": MAX_TOOLS + 1},
        {"definitions": [generated_tool(i) for i in range(MAX_TOOLS + 1)]},
        {"definitions": [{"type": "retrieval"}]},
        {"definitions": [{**generated_tool(0), "x": "y" * MAX_TOOL_DEFINITIONS_BYTES}]},
        {"count": 1, "fraction": 1.5},
        {"count": 1, "tool_choice": "sometimes"},
    ],
)
def test_tools_are_bounded_and_well_formed(tools: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        _workload(tools)
