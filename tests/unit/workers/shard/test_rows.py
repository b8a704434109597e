"""Record rows from a request's stamps: durations, and a failure's class and status."""

from __future__ import annotations

from tests.support.builders import MS, ROW_CONTEXT, timed_result
from workers.client.errors import ErrorClass, RequestFailure
from workers.client.result import RequestResult
from workers.prompts.images import GeneratedImage, RequestImages
from workers.prompts.plan import PlannedRequest
from workers.shard.rows import record_row


def test_record_row_durations() -> None:
    row = record_row(
        ROW_CONTEXT, PlannedRequest(3, 10, 3, "p"), timed_result(1_000 * MS, 100, [10, 12])
    )
    assert row["ttft_ns"] == 100 * MS
    assert row["schedule_lag_ns"] == 2 * MS
    assert row["itl_ns"] == [10 * MS, 12 * MS]
    assert row["e2e_ns"] == 123 * MS
    assert row["status"] == "ok" and row["error_class"] is None


def test_failed_request_row_keeps_class_and_status() -> None:
    failed = RequestResult(
        intended_start=0,
        sent=5,
        end=9,
        failure=RequestFailure(ErrorClass.HTTP_5XX, "HTTP 500", 500),
    )
    row = record_row(ROW_CONTEXT, PlannedRequest(0, 10, 3, "p"), failed)
    assert (row["status"], row["error_class"], row["http_status"], row["ttft_ns"]) == (
        "error",
        "http_5xx",
        500,
        None,
    )


def test_the_recorded_message_is_redacted_whoever_built_the_failure() -> None:
    # An adapter's own message quoting a server (not passed through redact) is redacted
    # when it becomes a record, the only form in which it leaves the worker.
    failed = RequestResult(
        intended_start=0,
        sent=5,
        end=9,
        failure=RequestFailure(
            ErrorClass.PROTOCOL,
            "bad frame from https://h.example/v1?key=k1 for Bearer sk-abcdefghijkl, id 98765432",
        ),
    )
    row = record_row(ROW_CONTEXT, PlannedRequest(0, 10, 3, "p"), failed)
    assert row["error_message"] == (
        "bad frame from https://h.example/v1?[redacted] for Bearer [redacted], id <n>"
    )


def _answer(**counts: object) -> RequestResult:
    result = timed_result(1_000 * MS, 100, [10, 12])
    result.prompt_tokens = result.prompt_count_source = None
    for name, value in counts.items():
        setattr(result, name, value)
    return result


def test_a_reported_prompt_count_is_kept_with_its_source() -> None:
    row = record_row(
        ROW_CONTEXT,
        PlannedRequest(0, 10, 3, "p", prompt_source="tokenizer"),
        _answer(prompt_tokens=14, prompt_count_source="usage", finish_reason="length"),
    )
    assert (row["prompt_tokens"], row["prompt_count_source"], row["finish_reason"]) == (
        14,
        "usage",
        "length",
    )


def test_an_unreported_prompt_is_the_tokenizers_count_or_unknown() -> None:
    events = _answer(completion_tokens=3, token_count_source="events")
    counted = record_row(
        ROW_CONTEXT, PlannedRequest(0, 10, 3, "p", prompt_source="tokenizer"), events
    )
    assert (counted["prompt_tokens"], counted["prompt_count_source"]) == (10, "tokenizer")
    # Sized one word a token, or calibrated: the planned length is no count of anything.
    for source in ("words", "calibrated", "warmup", "estimate"):
        row = record_row(ROW_CONTEXT, PlannedRequest(0, 10, 3, "p", prompt_source=source), events)
        assert (row["prompt_tokens"], row["prompt_count_source"]) == (None, None), source
        assert (row["completion_tokens"], row["token_count_source"]) == (3, "events")


def test_counts_no_column_holds_are_not_believed() -> None:
    absurd = _answer(
        prompt_tokens=2**31,
        prompt_count_source="usage",
        completion_tokens=7,
        token_count_source="usage",
    )
    row = record_row(ROW_CONTEXT, PlannedRequest(0, 10, 3, "p"), absurd)
    assert (row["prompt_tokens"], row["prompt_count_source"]) == (None, None)
    assert (row["completion_tokens"], row["token_count_source"]) == (3, "events")


def test_a_failed_request_gets_no_prompt_count() -> None:
    failed = RequestResult(
        intended_start=0, sent=5, end=9, failure=RequestFailure(ErrorClass.INCOMPLETE, "x")
    )
    row = record_row(ROW_CONTEXT, PlannedRequest(0, 10, 3, "p", prompt_source="tokenizer"), failed)
    assert (row["prompt_tokens"], row["finish_reason"], row["error_class"]) == (
        None,
        None,
        "incomplete",
    )


def test_image_columns_keep_count_bytes_pixels_digest_and_reported_tokens() -> None:
    images = RequestImages(
        (GeneratedImage("u", 4, 3, 100, "a" * 64), GeneratedImage("v", 2, 2, 50, "b" * 64))
    )
    result = timed_result(1_000 * MS, 100, [10])
    result.image_prompt_tokens = 170
    row = record_row(ROW_CONTEXT, PlannedRequest(0, 10, 3, "p", images=images), result)
    assert (row["images"], row["image_bytes"], row["image_pixels"]) == (2, 150, 16)
    assert row["image_digest"] == images.digest() and row["image_prompt_tokens"] == 170
    plain = record_row(ROW_CONTEXT, PlannedRequest(0, 10, 3, "p"), timed_result(0, 1, []))
    assert (plain["images"], plain["image_digest"], plain["image_prompt_tokens"]) == (0, None, None)


def test_a_tokenizer_count_is_no_count_of_a_prompt_with_images() -> None:
    images = RequestImages((GeneratedImage("u", 4, 3, 100, "a" * 64),))
    events = _answer(completion_tokens=3, token_count_source="events")
    row = record_row(
        ROW_CONTEXT, PlannedRequest(0, 10, 3, "p", prompt_source="tokenizer", images=images), events
    )
    assert (row["prompt_tokens"], row["prompt_count_source"]) == (None, None)
