"""What chat and completions streams share (workers/client/openai_stream.py): [DONE], error
events, usage, the finish check, and reasoning versus output tokens, the same for both."""

from __future__ import annotations

import json

import pytest

from workers.client.adapters.openai_chat import ChatParser
from workers.client.adapters.openai_completions import CompletionsParser
from workers.client.errors import IncompleteAnswer, ProtocolFailure, RequestFailure
from workers.client.openai_stream import OpenAIParser
from workers.client.result import RequestResult

PARSERS = [ChatParser, CompletionsParser]
DONE = b"data: [DONE]\n\n"
USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":5}}\n\n'


def choice(
    parser: type[OpenAIParser], finish: str | None = None, **fields: str
) -> dict[str, object]:
    if parser is ChatParser:
        return {"index": 0, "delta": fields, "finish_reason": finish}
    return {"index": 0, "text": fields.get("content", ""), "finish_reason": finish,
            **{k: v for k, v in fields.items() if k != "content"}}  # fmt: skip


def event(*choices: dict[str, object]) -> bytes:
    return b"data: " + json.dumps({"choices": list(choices)}).encode() + b"\n\n"


def run(parser_type: type[OpenAIParser], *chunks: bytes) -> RequestResult:
    result = RequestResult(intended_start=0, sent=0)
    parser = parser_type(result)
    for stamp, chunk in enumerate(chunks, start=1):
        parser.feed(chunk, stamp * 10)
    parser.finish(len(chunks) * 10 + 1)
    return result


@pytest.mark.parametrize("parser", PARSERS)
def test_reasoning_counts_for_the_first_token_only_and_usage_gives_counts(
    parser: type[OpenAIParser],
) -> None:
    result = run(
        parser,
        event(choice(parser, reasoning_content="thinking")),
        event(choice(parser, content="Hi")),
        event(choice(parser, "stop", content="!")),
        USAGE + DONE,
    )
    assert (result.first_token, result.first_output_token) == (10, 20)
    assert list(result.token_stamps) == [10, 20, 30]
    assert (result.prompt_tokens, result.completion_tokens) == (7, 5)
    assert result.finish_reason == "stop"


@pytest.mark.parametrize("parser", PARSERS)
def test_an_answer_without_finish_reason_is_incomplete_even_with_done(
    parser: type[OpenAIParser],
) -> None:
    with pytest.raises(IncompleteAnswer, match=r"with \[DONE\] but no finish_reason after 1 "):
        run(parser, event(choice(parser, content="Hi")), DONE)
    with pytest.raises(IncompleteAnswer, match=r"without \[DONE\]"):
        run(parser, event(choice(parser, content="Hi")))


@pytest.mark.parametrize("parser", PARSERS)
def test_an_error_event_fails_the_request_with_its_status(parser: type[OpenAIParser]) -> None:
    with pytest.raises(RequestFailure, match="error event mid-stream: overloaded") as caught:
        run(parser, b'data: {"error":{"message":"overloaded","code":503}}\n\n')
    assert caught.value.http_status == 503


@pytest.mark.parametrize("parser", PARSERS)
def test_choices_must_be_a_list_of_objects(parser: type[OpenAIParser]) -> None:
    with pytest.raises(ProtocolFailure, match="'choices' is not a list"):
        run(parser, b'data: {"choices":{"x":1}}\n\n')
    with pytest.raises(ProtocolFailure, match="choice"):
        run(parser, b'data: {"choices":[1]}\n\n')


def usage_event(usage: dict[str, object]) -> bytes:
    return b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n"


@pytest.mark.parametrize("parser", PARSERS)
@pytest.mark.parametrize(
    ("details", "expected"),
    [
        ({"cached_tokens": 96}, 96),  # OpenAI and vLLM with prefix caching
        ({"cached_tokens": 0}, 0),  # reported: nothing was cached
        ({"audio_tokens": 0}, None),  # details without the count: unknown
        (None, None),  # no details at all: unknown, never zero
        ({"cached_tokens": -3}, None),  # nonsense is not a count
        ({"cached_tokens": True}, None),
        ({"cached_tokens": "96"}, None),
    ],
)
def test_cached_tokens_come_from_prompt_tokens_details_or_stay_unknown(
    parser: type[OpenAIParser], details: dict[str, object] | None, expected: int | None
) -> None:
    usage: dict[str, object] = {"prompt_tokens": 128, "completion_tokens": 1}
    if details is not None:
        usage["prompt_tokens_details"] = details
    result = run(parser, event(choice(parser, "length", content="Hi")), usage_event(usage), DONE)
    assert result.cached_tokens == expected
    assert result.prompt_tokens == 128


@pytest.mark.parametrize("parser", PARSERS)
def test_a_later_usage_chunk_without_details_keeps_the_cached_count(
    parser: type[OpenAIParser],
) -> None:
    counted = {
        "prompt_tokens": 9,
        "completion_tokens": 1,
        "prompt_tokens_details": {"cached_tokens": 8},
    }
    bare = {"prompt_tokens": 9, "completion_tokens": 1}
    result = run(
        parser,
        event(choice(parser, "stop", content="Hi")),
        usage_event(counted),
        usage_event(bare),
        DONE,
    )
    assert result.cached_tokens == 8
