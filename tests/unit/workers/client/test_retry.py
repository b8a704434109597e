"""Retry-After parsing and the opt-in 429 retry loop (pure logic; attempts are stubs)."""

from __future__ import annotations

import asyncio
import email.utils
import time

import pytest

from scenarios.providers.base import RetryPolicy
from workers.client.errors import ErrorClass, RequestFailure
from workers.client.result import RequestResult
from workers.client.retry import measure_with_retry, next_delay, retry_after_seconds, status_failure


def test_retry_after_forms() -> None:
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"retry-after": "1", "retry-after-ms": "250"}) == 0.25
    assert retry_after_seconds({}) is None
    assert retry_after_seconds({"retry-after": "soon"}) is None
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 < retry_after_seconds({"retry-after": future}) <= 30  # type: ignore[operator]


def test_status_failure_flags_exhausted_quota() -> None:
    quota = status_failure(429, {}, b'{"error":{"code":"insufficient_quota"}}', ())
    rate = status_failure(
        429, {"retry-after": "2"}, b'{"error":{"code":"rate_limit_exceeded"}}', ()
    )
    assert quota.quota_exhausted and not rate.quota_exhausted
    assert (rate.error_class, rate.http_status, rate.retry_after_s) == (
        ErrorClass.HTTP_429,
        429,
        2.0,
    )


def test_backoff_doubles_within_jitter() -> None:
    policy = RetryPolicy(initial_backoff_s=1.0)
    result = RequestResult(intended_start=0, failure=status_failure(429, {}, b"", ()))
    for retries in range(4):
        assert 0.5 * 2**retries <= next_delay(policy, result, retries) <= 2**retries


def _results(*failures: RequestFailure | None) -> tuple[list[int], object]:
    calls: list[int] = []

    async def attempt() -> RequestResult:
        calls.append(1)
        result = RequestResult(intended_start=0, sent=len(calls) * 1000)
        result.failure = failures[min(len(calls), len(failures)) - 1]
        return result

    return calls, attempt


LIMITED = status_failure(429, {"retry-after": "0"}, b"", ())


def test_without_policy_a_429_is_returned_as_is() -> None:
    calls, attempt = _results(LIMITED, None)
    result = asyncio.run(measure_with_retry(None, attempt))  # type: ignore[arg-type]
    assert result.failure is LIMITED and len(calls) == 1 and result.retries == 0


def test_retried_result_keeps_the_first_send() -> None:
    calls, attempt = _results(LIMITED, LIMITED, None)
    result = asyncio.run(measure_with_retry(RetryPolicy(max_retries=3), attempt))  # type: ignore[arg-type]
    assert result.failure is None and len(calls) == 3
    assert (result.retries, result.sent) == (2, 1000)
    assert result.retry_wait_ns >= 0


@pytest.mark.parametrize(
    "failure",
    [
        status_failure(500, {}, b"", ()),
        status_failure(429, {}, b"insufficient_quota", ()),
        RequestFailure(ErrorClass.TIMEOUT, "slow"),
    ],
)
def test_only_plain_429s_are_retried(failure: RequestFailure) -> None:
    calls, attempt = _results(failure, None)
    result = asyncio.run(measure_with_retry(RetryPolicy(), attempt))  # type: ignore[arg-type]
    assert result.failure is failure and len(calls) == 1


def test_429_after_a_token_is_not_retried() -> None:
    async def attempt() -> RequestResult:
        return RequestResult(intended_start=0, first_token=5, failure=LIMITED)

    result = asyncio.run(measure_with_retry(RetryPolicy(), attempt))
    assert result.retries == 0
