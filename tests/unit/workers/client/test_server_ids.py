"""Ids and in-band timings a response carries (workers/client/server_ids.py): which
header wins, what is an id, and TGI's timing headers, hostile values included."""

from __future__ import annotations

import httpx
import pytest

from workers.client.result import RequestResult
from workers.client.server_ids import (
    MAX_ID_CHARS,
    REQUEST_ID_HEADERS,
    clean_id,
    header_ms,
    note_response,
    note_response_id,
    note_tgi_timings,
    server_request_id,
)


def result() -> RequestResult:
    return RequestResult(intended_start=0)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"x-request-id": "req_abc"}, "req_abc"),  # OpenAI, vLLM, the simulator
        ({"request-id": "req_011CS"}, "req_011CS"),  # Anthropic
        ({"apim-request-id": "6f1c-..."}, "6f1c-..."),  # Azure API management
        ({"x-ms-request-id": "ms-1"}, "ms-1"),
        ({"X-Amzn-RequestId": "a1b2"}, "a1b2"),  # Bedrock, any case
        ({"apim-request-id": "apim", "x-request-id": "openai"}, "openai"),  # first in order
        ({"content-type": "text/event-stream"}, None),
    ],
)
def test_the_request_id_header_by_the_ordered_list(
    headers: dict[str, str], expected: str | None
) -> None:
    assert server_request_id(httpx.Headers(headers)) == expected


def test_the_list_is_lower_case_and_starts_with_the_common_header() -> None:
    assert REQUEST_ID_HEADERS[0] == "x-request-id"
    assert all(name == name.lower() for name in REQUEST_ID_HEADERS)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("chatcmpl-123", "chatcmpl-123"),
        ("  padded  ", "padded"),
        ("", None),
        ("   ", None),
        ("bad\x00id", None),  # control characters: not an id
        ("tab\tid", None),
        (12345, None),  # an id is a string, not a number the stream happened to send
        (None, None),
        (["a"], None),
        ({"id": "x"}, None),
    ],
)
def test_what_is_an_id(value: object, expected: str | None) -> None:
    assert clean_id(value) == expected


def test_a_huge_id_is_cut_not_refused() -> None:
    assert clean_id("x" * 1_000_000) == "x" * MAX_ID_CHARS


def test_the_first_response_id_and_header_are_kept() -> None:
    r = result()
    note_response_id(r, "first")
    note_response_id(r, "second")
    note_response(r, httpx.Headers({"x-request-id": "one"}))
    note_response(r, httpx.Headers({"x-request-id": "two"}))
    assert (r.response_id, r.server_request_id) == ("first", "one")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", 0),
        ("12", 12_000_000),  # TGI writes whole milliseconds
        (" 7 ", 7_000_000),
        ("86400000", 86_400_000_000_000),  # a day: the longest taken
        ("86400001", None),
        ("9" * 10_000, None),  # huge
        ("-5", None),  # negative
        ("+5", None),
        ("1.5", None),  # TGI never sends fractions: not its header
        ("1e3", None),
        ("abc", None),
        ("", None),
        ("٣", None),  # a non-ASCII digit
        (None, None),
    ],
)
def test_tgi_milliseconds(value: str | None, expected: int | None) -> None:
    assert header_ms(value) == expected


def test_tgi_queue_time_is_the_server_queue() -> None:
    r = result()
    headers = httpx.Headers(
        {"x-queue-time": "42", "x-inference-time": "900", "x-total-time": "950"}
    )
    note_tgi_timings(r, headers)
    assert (r.server_queue_ns, r.server_timing_source) == (42_000_000, "tgi")
    assert r.server_ttft_ns is None  # inference time is prefill and decode together


@pytest.mark.parametrize("value", ["not-a-number", "-1", "1" * 40, ""])
def test_a_bad_tgi_header_leaves_the_timing_unknown(value: str) -> None:
    r = result()
    note_tgi_timings(r, httpx.Headers({"x-queue-time": value}))
    assert (r.server_queue_ns, r.server_timing_source) == (None, None)


def test_no_tgi_headers_no_source() -> None:
    r = result()
    note_tgi_timings(r, httpx.Headers({"x-compute-type": "gpu+optimized"}))
    assert (r.server_queue_ns, r.server_timing_source) == (None, None)
