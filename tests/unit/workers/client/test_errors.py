"""Error classification and redaction."""

from __future__ import annotations

import asyncio

import httpx

from workers.client.errors import (
    ErrorClass,
    class_of_status,
    classify_exception,
    http_failure,
    redact,
)


def test_status_classes() -> None:
    assert class_of_status(429) is ErrorClass.HTTP_429
    assert class_of_status(404) is ErrorClass.HTTP_4XX
    assert class_of_status(503) is ErrorClass.HTTP_5XX


def test_exceptions_map_to_domain_classes() -> None:
    assert classify_exception(httpx.ConnectError("refused")).error_class is ErrorClass.CONNECT
    assert classify_exception(httpx.ReadTimeout("slow")).error_class is ErrorClass.TIMEOUT
    assert classify_exception(TimeoutError()).error_class is ErrorClass.TIMEOUT
    assert classify_exception(httpx.RemoteProtocolError("bad")).error_class is ErrorClass.PROTOCOL
    assert classify_exception(asyncio.CancelledError()).error_class is ErrorClass.CANCELLED
    assert classify_exception(ValueError("bug")).error_class is ErrorClass.PROTOCOL


def test_redaction_removes_keys_and_bounds_length() -> None:
    key = "abcd1234secretvalue"
    message = redact(f"denied for Bearer {key} api_key={key} sk-live-ABCDEFGH1234", (key,))
    assert key not in message and "sk-live-ABCDEFGH1234" not in message
    assert "[redacted]" in message
    assert len(redact("x" * 5000)) <= 300


def test_http_failure_keeps_status_and_redacts_echoed_key() -> None:
    failure = http_failure(401, b'{"error": "invalid key sk-abcdefghijklmnop"}', ())
    assert failure.http_status == 401 and failure.error_class is ErrorClass.HTTP_4XX
    assert "sk-abcdefghijklmnop" not in failure.message
