"""Wire-format parsers of every adapter on the recorded bytes (pure logic, no network).

Each recorded body is fed whole, and split into 1-byte and 7-byte chunks with a distinct
stamp per chunk: the outcome must not depend on how TCP cut the bytes, and a token's
stamp must be that of the chunk that completed its event.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.fakes.eventstream import frame, recorded_frames
from tests.support.paths import PROVIDER_DATA
from workers.client.adapters.bedrock import BedrockParser
from workers.client.adapters.llamacpp import LlamaCppParser
from workers.client.adapters.openai_chat import ChatParser
from workers.client.adapters.openai_completions import CompletionsParser
from workers.client.adapters.replicate import ReplicateParser
from workers.client.adapters.tgi import TGIParser
from workers.client.errors import RequestFailure
from workers.client.result import RequestResult
from workers.client.streaming import StreamParser

Factory = Callable[[RequestResult], StreamParser]


def run(factory: Factory, body: bytes, size: int | None) -> RequestResult:
    result = RequestResult(intended_start=0)
    parser = factory(result)
    chunks = [body] if size is None else [body[i : i + size] for i in range(0, len(body), size)]
    for stamp, chunk in enumerate(chunks, start=1):
        parser.feed(chunk, stamp)
    parser.finish(len(chunks) + 1)
    return result


# parser, recorded body, (token events, prompt, completion, source, finish reason)
CASES = {
    "openai": (ChatParser, "openai/stream.sse", (3, 9, 3, "usage", "length")),
    "openai-completions": (
        CompletionsParser,
        "openai-completions/stream.sse",
        (3, 5, 3, "usage", "length"),
    ),
    "azure-openai": (ChatParser, "azure-openai/stream.sse", (2, 9, 2, "usage", "length")),
    "bedrock": (BedrockParser, "bedrock/stream.bin", (3, 11, 3, "usage", "length")),
    # TGI's eos_token and llama.cpp's stop_type limit, in the shared vocabulary.
    "tgi": (TGIParser, "tgi/stream.sse", (2, 7, 3, "usage", "stop")),
    "llamacpp": (LlamaCppParser, "llamacpp/stream.sse", (2, 6, 2, "usage", "length")),
    # Replicate's stream has no counts and never a reason: events counted, the prompt
    # count unknown (never the planned length), no finish reason.
    "replicate": (ReplicateParser, "replicate/stream.sse", (3, None, 3, "events", None)),
    # llama-cpp-python's server: a finish_reason, but no usage chunk.
    "llama-cpp-python": (ChatParser, "openai/no-usage.sse", (3, None, 3, "events", "stop")),
}


@pytest.mark.parametrize("size", [None, 1, 7])
@pytest.mark.parametrize("kind", sorted(CASES))
def test_recorded_stream(kind: str, size: int | None) -> None:
    factory, path, (events, prompt, completion, source, reason) = CASES[kind]
    body = (PROVIDER_DATA / path).read_bytes()
    result = run(factory, body, size)
    assert len(result.token_stamps) == events
    assert (result.prompt_tokens, result.completion_tokens, result.token_count_source) == (
        prompt,
        completion,
        source,
    )
    assert result.prompt_count_source == (None if prompt is None else "usage")
    assert result.finish_reason == reason
    assert result.first_token == result.first_output_token == result.token_stamps[0]
    assert list(result.token_stamps) == sorted(result.token_stamps)
    if size == 1:
        # Byte by byte, an event is stamped with the chunk holding its last byte: stamps
        # are distinct, and the first token is not the first byte (role/filter chunks).
        assert len(set(result.token_stamps)) == events
        assert result.first_token > 1  # type: ignore[operator]


def test_first_token_stamp_is_the_chunk_that_completes_the_event() -> None:
    body = (PROVIDER_DATA / "tgi/stream.sse").read_bytes()
    first_event_end = body.index(b"\n\n") + 2
    result = RequestResult(intended_start=0)
    parser = TGIParser(result)
    parser.feed(body[: first_event_end - 1], 10)  # all but the final newline
    assert result.first_token is None
    parser.feed(body[first_event_end - 1 :], 20)
    assert result.first_token == 20


def test_llamacpp_timings_become_server_durations() -> None:
    result = run(LlamaCppParser, (PROVIDER_DATA / "llamacpp/stream.sse").read_bytes(), None)
    assert (result.server_prompt_ns, result.server_decode_ns) == (12_500_000, 20_250_000)


def test_tgi_special_eos_token_is_not_a_token_event() -> None:
    result = run(TGIParser, (PROVIDER_DATA / "tgi/stream.sse").read_bytes(), None)
    # 3 generated tokens (server count), 2 token-bearing events: the EOS piece is special.
    assert (len(result.token_stamps), result.completion_tokens) == (2, 3)


@pytest.mark.parametrize(
    ("factory", "path", "error_class", "status"),
    [
        (CompletionsParser, "openai-completions/midstream-error.sse", "http_5xx", 500),
        (TGIParser, "tgi/midstream-error.sse", "http_4xx", 424),
        (LlamaCppParser, "llamacpp/midstream-error.sse", "http_5xx", 500),
        (ReplicateParser, "replicate/midstream-error.sse", "http_5xx", None),
    ],
)
def test_midstream_errors(
    factory: Factory, path: str, error_class: str, status: int | None
) -> None:
    with pytest.raises(RequestFailure) as caught:
        run(factory, (PROVIDER_DATA / path).read_bytes(), 5)
    assert (caught.value.error_class, caught.value.http_status) == (error_class, status)


@pytest.mark.parametrize(
    ("frames", "error_class", "status"),
    [("midstream_exception", "http_4xx", 424), ("throttling_exception", "http_429", 429)],
)
def test_bedrock_exception_frames(frames: str, error_class: str, status: int) -> None:
    with pytest.raises(RequestFailure) as caught:
        run(BedrockParser, b"".join(recorded_frames(frames)), 9)
    assert (caught.value.error_class, caught.value.http_status) == (error_class, status)


def test_bedrock_corrupt_frame_is_a_protocol_failure() -> None:
    good = frame([(":event-type", "messageStop"), (":message-type", "event")], b"{}")
    corrupt = good[:-1] + bytes([good[-1] ^ 0xFF])  # wrong message CRC
    with pytest.raises(RequestFailure) as caught:
        run(BedrockParser, corrupt, None)
    assert caught.value.error_class == "protocol"


def test_bedrock_recorded_binary_matches_its_readable_source() -> None:
    assert (PROVIDER_DATA / "bedrock/stream.bin").read_bytes() == b"".join(
        recorded_frames("stream")
    )


def test_bedrock_reasoning_delta_is_first_token_not_output() -> None:
    frames = [
        frame(
            [(":event-type", "contentBlockDelta"), (":message-type", "event")],
            b'{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"Let me think"}}}',
        ),
        frame(
            [(":event-type", "contentBlockDelta"), (":message-type", "event")],
            b'{"contentBlockIndex":1,"delta":{"text":"Hi"}}',
        ),
        frame(
            [(":event-type", "messageStop"), (":message-type", "event")],
            b'{"stopReason":"end_turn"}',
        ),
    ]
    result = RequestResult(intended_start=0)
    parser = BedrockParser(result)
    for stamp, item in enumerate(frames, start=1):
        parser.feed(item, stamp)
    parser.finish(9)
    assert (result.first_token, result.first_output_token) == (1, 2)
    assert result.token_count_source == "events" and result.prompt_tokens is None
    assert result.finish_reason == "stop"  # end_turn


def test_completions_reasoning_text_counts_for_first_token_only() -> None:
    body = (
        b'data: {"choices":[{"index":0,"text":"","reasoning_content":"hmm"}]}\n\n'
        b'data: {"choices":[{"index":0,"text":"Yes","finish_reason":"stop"}]}\n\n'
        b"data: [DONE]\n\n"
    )
    result = run(CompletionsParser, body, 1)
    assert result.first_token is not None and result.first_output_token is not None
    assert result.first_token < result.first_output_token


@pytest.mark.parametrize(
    ("factory", "path"),
    [
        (CompletionsParser, "openai-completions/stream.sse"),
        (TGIParser, "tgi/stream.sse"),
        (LlamaCppParser, "llamacpp/stream.sse"),
        (ReplicateParser, "replicate/stream.sse"),
        (BedrockParser, "bedrock/stream.bin"),
    ],
)
def test_stream_ended_after_first_event_is_an_incomplete_answer(
    factory: Factory, path: str
) -> None:
    body = (PROVIDER_DATA / path).read_bytes()
    first = (
        recorded_frames("stream")[0] + recorded_frames("stream")[1]
        if path.endswith(".bin")
        else body[: body.index(b"\n\n") + 2]
    )
    with pytest.raises(RequestFailure) as caught:
        run(factory, first, None)
    assert caught.value.error_class == "incomplete"


@pytest.mark.parametrize(
    ("factory", "path"),
    [
        (ChatParser, "openai/no-finish.sse"),
        (CompletionsParser, "openai-completions/no-finish.sse"),
    ],
)
def test_done_without_a_finish_reason_is_an_incomplete_answer(factory: Factory, path: str) -> None:
    with pytest.raises(RequestFailure) as caught:
        run(factory, (PROVIDER_DATA / path).read_bytes(), 7)
    assert caught.value.error_class == "incomplete"
    assert "with [DONE] but no finish_reason" in caught.value.message


LLAMA_TOKEN = b'data: {"content":" hi","stop":false}\n\n'


@pytest.mark.parametrize(
    ("final", "reason"),
    [
        (b'{"content":"","stop":true,"stop_type":"eos"}', "stop"),
        (b'{"content":"","stop":true,"stop_type":"word","stopping_word":"\\n"}', "stop"),
        (b'{"content":"","stop":true,"stop_type":"limit"}', "length"),
        # Servers before stop_type say it with flags.
        (b'{"content":"","stop":true,"stopped_eos":false,"stopped_limit":true}', "length"),
        (b'{"content":"","stop":true,"stopped_eos":true,"stopped_limit":false}', "stop"),
        (b'{"content":"","stop":true,"stop_type":"none"}', None),
        (b'{"content":"","stop":true}', None),
    ],
)
def test_llamacpp_stop_reasons(final: bytes, reason: str | None) -> None:
    body = LLAMA_TOKEN + b"data: " + final + b"\n\n"
    if reason is None:
        with pytest.raises(RequestFailure) as caught:
            run(LlamaCppParser, body, None)
        assert caught.value.error_class == "incomplete"
        assert "no stop reason" in caught.value.message
    else:
        assert run(LlamaCppParser, body, None).finish_reason == reason


def test_tgi_final_event_without_details_is_an_incomplete_answer() -> None:
    body = (
        b'data:{"index":1,"token":{"id":1,"text":"Hi","special":false},'
        b'"generated_text":"Hi","details":null}\n\n'
    )
    with pytest.raises(RequestFailure) as caught:
        run(TGIParser, body, None)
    assert caught.value.error_class == "incomplete"
    assert "without details.finish_reason" in caught.value.message


def test_bedrock_message_stop_without_a_reason_is_an_incomplete_answer() -> None:
    frames = [
        frame(
            [(":event-type", "contentBlockDelta"), (":message-type", "event")],
            b'{"contentBlockIndex":0,"delta":{"text":"Hi"}}',
        ),
        frame([(":event-type", "messageStop"), (":message-type", "event")], b"{}"),
    ]
    with pytest.raises(RequestFailure) as caught:
        run(BedrockParser, b"".join(frames), None)
    assert caught.value.error_class == "incomplete"
    assert "messageStop without a stopReason" in caught.value.message


def test_llamacpp_prompt_time_is_also_the_server_ttft() -> None:
    result = run(LlamaCppParser, (PROVIDER_DATA / "llamacpp/stream.sse").read_bytes(), None)
    assert result.server_ttft_ns == result.server_prompt_ns == 12_500_000
    assert result.server_timing_source == "llamacpp"
    assert result.response_id is None  # /completion events carry no id


@pytest.mark.parametrize(
    "timings",
    [
        b'{"prompt_ms": -3.5, "predicted_ms": -1}',
        b'{"prompt_ms": 1e300, "predicted_ms": 1e300}',
        b'{"prompt_ms": "12.5", "predicted_ms": null}',
        b'{"prompt_ms": true, "predicted_ms": false}',
        b'"not an object"',
    ],
    ids=["negative", "huge", "string", "bool", "not-object"],
)
def test_llamacpp_hostile_timings_are_unknown(timings: bytes) -> None:
    final = b'data: {"content":"","stop":true,"stop_type":"limit","tokens_predicted":1,' + (
        b'"tokens_evaluated":2,"timings":' + timings + b"}\n\n"
    )
    result = run(LlamaCppParser, b'data: {"content":"a","stop":false}\n\n' + final, None)
    assert result.finish_reason == "length"  # the request itself is fine
    assert (result.server_prompt_ns, result.server_decode_ns, result.server_ttft_ns) == (
        None,
        None,
        None,
    )
    assert result.server_timing_source is None


@pytest.mark.parametrize(
    ("kind", "response_id"),
    [
        ("openai", "chatcmpl-9f8e"),
        ("openai-completions", "cmpl-4c1d"),
        ("azure-openai", "chatcmpl-AZ1x"),  # the first chunk's empty id is not one
        ("tgi", None),
        ("bedrock", None),
        ("replicate", None),  # the prediction's id comes from its creation, not the stream
    ],
)
def test_response_id_from_the_stream(kind: str, response_id: str | None) -> None:
    factory, path, _ = CASES[kind]
    result = run(factory, (PROVIDER_DATA / path).read_bytes(), 3)
    assert result.response_id == response_id
