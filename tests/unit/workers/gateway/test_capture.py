"""The capture side's pure parts: frames survive any split of the byte stream, and an
answer's stamped bytes become the same result a worker would have measured."""

from __future__ import annotations

from workers.client.errors import ErrorClass
from workers.gateway.capture import Answer, primary_result
from workers.gateway.handoff import FrameReader, frame

ROLE = b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
TOKEN = b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
FINISH = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}\n\n'
DONE = b"data: [DONE]\n\n"


def test_frames_are_read_back_whatever_the_split() -> None:
    messages = [
        ("begin", "k1", 1, 123, b'{"messages":[]}', None),
        ("end", "k1", 5, 200, [], [(7, b"\x00" * 70_000)], 9, None, True),
        ("stats", 3),
    ]
    data = b"".join(frame(m) for m in messages)
    for size in (1, 3, 4096, len(data)):
        reader = FrameReader()
        got = []
        for start in range(0, len(data), size):
            got += reader.feed(data[start : start + size])
        assert got == messages, size


def stream_answer(chunks: list[tuple[int, bytes]], error: tuple[str, str] | None = None) -> Answer:
    return Answer(1_000, 200, {}, chunks, 9_000, error, True)


def test_a_streamed_answer_is_measured_from_its_arrival_stamps() -> None:
    chunks = [(2_000, ROLE), (3_000, TOKEN), (4_500, TOKEN + FINISH + USAGE), (5_000, DONE)]
    result = primary_result(500, stream_answer(chunks), ())
    assert result.ok
    assert result.intended_start == 500 and result.sent == 1_000 and result.end == 9_000
    assert result.first_byte == 2_000
    assert result.first_token == 3_000  # a role-only chunk is not a token
    assert result.itl_gaps() == [1_500]
    assert (result.prompt_tokens, result.completion_tokens) == (5, 2)
    assert result.token_count_source == "usage"


def test_failures_keep_their_class_and_redact_secrets() -> None:
    secret = "sk-primary-secret-1234"
    status = Answer(1, 429, {"retry-after": "3"}, [(2, b'{"error":"slow down"}')], 3, None, True)
    limited = primary_result(0, status, (secret,))
    assert limited.failure is not None and limited.failure.error_class == ErrorClass.HTTP_429

    refused = Answer(1, None, {}, [], 3, ("connect", f"refused with {secret}"), True)
    unreachable = primary_result(0, refused, (secret,))
    assert unreachable.failure is not None
    assert unreachable.failure.error_class == ErrorClass.CONNECT
    assert secret not in unreachable.failure.message

    cut = primary_result(0, stream_answer([(2, TOKEN)], ("cancelled", "client went away")), ())
    assert cut.failure is not None and cut.failure.error_class == ErrorClass.CANCELLED
    assert cut.first_token == 2


def test_a_plain_answer_gives_first_byte_and_usage_only() -> None:
    body = b'{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":4,"completion_tokens":1}}'
    answer = Answer(10, 200, {}, [(20, body[:30]), (25, body[30:])], 30, None, False)
    result = primary_result(5, answer, ())
    assert result.ok and result.first_byte == 20 and result.first_token is None
    assert (result.prompt_tokens, result.completion_tokens) == (4, 1)
