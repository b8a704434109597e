"""The gateway exchange's helpers: reason phrases and OpenAI-style error bodies."""

from __future__ import annotations

import orjson

from workers.gateway.exchange import MAX_CAPTURED_BYTES, error_body, reason_phrase


def test_reason_phrase_names_known_statuses_and_tolerates_others() -> None:
    assert reason_phrase(200) == b"OK"
    assert reason_phrase(502) == b"Bad Gateway"
    assert reason_phrase(599) == b"Unknown"


def test_error_body_is_an_openai_error_object() -> None:
    assert orjson.loads(error_body(413, "too large")) == {
        "error": {"message": "too large", "type": "invalid_request_error", "code": 413}
    }
    assert orjson.loads(error_body(502, "down", "upstream_error"))["error"]["type"] == (
        "upstream_error"
    )


def test_captured_bytes_are_bounded() -> None:
    assert 0 < MAX_CAPTURED_BYTES <= 64 * 1024 * 1024
