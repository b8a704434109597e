"""SSE splitting and chat-stream interpretation edge cases (docs/metrics.md)."""

from __future__ import annotations

import json

import pytest

from workers.client.chat_stream import ChatStream
from workers.client.errors import ErrorClass, RequestFailure
from workers.client.result import AnswerText, RequestResult
from workers.client.sse import SSEDecoder


def event(
    delta: dict[str, object] | None = None, finish: str | None = None, **extra: object
) -> bytes:
    body: dict[str, object] = {
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    }
    body.update(extra)
    return b"data: " + json.dumps(body).encode() + b"\n\n"


USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":5}}\n\n'
DONE = b"data: [DONE]\n\n"


def run_stream(chunks: list[tuple[int, bytes]]) -> RequestResult:
    result = RequestResult(intended_start=0, sent=0)
    stream = ChatStream(result)
    decoder = SSEDecoder()
    for stamp, chunk in chunks:
        for payload in decoder.feed(chunk):
            stream.on_payload(payload, stamp)
    for payload in decoder.flush():
        stream.on_payload(payload, chunks[-1][0])
    stream.finish()
    return result


def test_role_only_first_chunk_is_not_a_token() -> None:
    result = run_stream(
        [
            (10, event({"role": "assistant", "content": ""})),
            (50, event({"content": "Hi"})),
            (60, event({"content": " there"}, finish="stop")),
            (61, USAGE + DONE),
        ]
    )
    assert result.first_token == 50
    assert list(result.token_stamps) == [50, 60]
    assert result.itl_gaps() == [10]


def test_chunk_with_several_tokens_is_one_event_and_usage_gives_counts() -> None:
    result = run_stream(
        [
            (5, event({"content": "a b c d"})),
            (9, event({"content": "e"}, finish="length")),
            (9, USAGE + DONE),
        ]
    )
    assert list(result.token_stamps) == [5, 9]
    assert (result.prompt_tokens, result.completion_tokens, result.token_count_source) == (
        7,
        5,
        "usage",
    )


def test_without_usage_completions_come_from_events_and_the_prompt_count_is_unknown() -> None:
    result = run_stream(
        [(5, event({"content": "x"})), (6, event({"content": "y"}, finish="stop")), (7, DONE)]
    )
    assert (result.prompt_tokens, result.completion_tokens, result.token_count_source) == (
        None,
        2,
        "events",
    )
    assert result.prompt_count_source is None and result.finish_reason == "stop"


def test_missing_done_after_finish_reason_is_complete() -> None:
    result = run_stream([(5, event({"content": "x"}, finish="stop"))])
    assert result.completion_tokens == 1 and result.finish_reason == "stop"


def test_stream_cut_short_is_an_incomplete_answer() -> None:
    with pytest.raises(RequestFailure) as caught:
        run_stream([(5, event({"content": "x"})), (6, event({"content": "y"}))])
    assert caught.value.error_class is ErrorClass.INCOMPLETE
    assert "without [DONE] but no finish_reason after 2 token events" in caught.value.message


def test_done_without_a_finish_reason_is_an_incomplete_answer() -> None:
    with pytest.raises(RequestFailure) as caught:
        run_stream([(5, event({"content": "x"})), (6, USAGE + DONE)])
    assert caught.value.error_class is ErrorClass.INCOMPLETE
    assert "with [DONE] but no finish_reason after 1 token events" in caught.value.message


@pytest.mark.parametrize(
    ("raw", "recorded"),
    [
        ("function_call", "tool_calls"),
        ("content_filter", "content_filter"),
        ("abort", "abort"),  # a word outside the vocabulary is kept as the server wrote it
        ("<b>\u202e" + "x" * 40, "other"),  # anything else is not server text in a record
    ],
)
def test_finish_reasons_are_recorded_in_one_vocabulary(raw: str, recorded: str) -> None:
    result = run_stream([(5, event({"content": "x"}, finish=raw)), (6, DONE)])
    assert result.finish_reason == recorded


def test_malformed_json_is_a_protocol_failure() -> None:
    with pytest.raises(RequestFailure) as caught:
        run_stream([(5, b'data: {"choices": [\n\n')])
    assert caught.value.error_class is ErrorClass.PROTOCOL


def test_keep_alive_comments_crlf_and_split_events() -> None:
    whole = event({"content": "hello"})
    crlf = event({"content": "world"}, finish="stop").replace(b"\n", b"\r\n")
    result = run_stream(
        [
            (1, b": keep-alive\n\n"),
            (2, whole[:17]),
            (3, whole[17:]),
            (4, b": ping\r\n\r\n" + crlf),
            (5, DONE),
        ]
    )
    # The event completed by the chunk at stamp 3 carries that stamp.
    assert list(result.token_stamps) == [3, 4]


def test_reasoning_counts_for_first_token_not_first_output_token() -> None:
    result = run_stream(
        [
            (5, event({"reasoning_content": "thinking"})),
            (8, event({"reasoning": "more"})),
            (12, event({"content": "answer"}, finish="stop")),
            (13, DONE),
        ]
    )
    assert (result.first_token, result.first_output_token, result.last_token) == (5, 12, 12)


def test_error_event_mid_stream_is_classified() -> None:
    with pytest.raises(RequestFailure) as caught:
        run_stream(
            [
                (5, event({"content": "x"})),
                (6, b'data: {"error": {"message": "overloaded", "code": 429}}\n\n'),
            ]
        )
    assert caught.value.error_class is ErrorClass.HTTP_429


def test_multiline_data_fields_are_joined() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"event: x\ndata: a\ndata: b\nid: 1\n\n") == [b"a\nb"]


def test_a_chunk_of_one_whole_event_reads_as_the_general_case_does() -> None:
    """One-event chunks take a shortcut; each gives what the general search for event
    ends gives it (there, followed by a second event)."""
    chunks = [b"data: x\n\n", b"data:x\n\n", b"data\n\n", b"\n\n", b"id: 1\n\n", b": ping\n\n"]
    for chunk in chunks:
        general = SSEDecoder().feed(chunk + b"data: next\n\n")
        assert general[-1] == b"next"
        assert SSEDecoder().feed(chunk) == general[:-1], chunk
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a") == []
    assert decoder.feed(b"\n\n") == [b"a"]  # a completed event, not a chunk of its own
    assert decoder.feed(b"data: b\r\n\r\n") == [b"b"]


def test_the_answer_text_is_kept_only_when_asked_and_only_up_to_its_limit() -> None:
    chunks = [
        (1, event({"role": "assistant", "content": ""})),
        (2, event({"content": "Hello"})),
        (3, event({"reasoning_content": "thinking"})),  # reasoning is not the answer
        (4, event({"content": ", world"}, finish="stop")),
        (5, DONE),
    ]
    assert run_stream(chunks).answer is None  # not asked: nothing kept
    result = RequestResult(intended_start=0, sent=0, answer=AnswerText(100))
    stream, decoder = ChatStream(result), SSEDecoder()
    for stamp, chunk in chunks:
        for payload in decoder.feed(chunk):
            stream.on_payload(payload, stamp)
    stream.finish()
    assert result.answer is not None and result.answer.text() == "Hello, world"
    assert not result.answer.cut
    short = AnswerText(7)
    for piece in ("Hello", ", world", "!"):
        short.add(piece)
    assert (short.text(), short.cut, short.chars) == ("Hello, ", True, 7)
