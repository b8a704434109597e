"""HTTP 429 handling shared by every adapter: ``Retry-After`` parsing and the opt-in retry loop.

By default a 429 is a recorded error (``http_429``): a benchmark must show rate limiting,
not hide it. A provider with ``retry:`` set retries 429 answers, waiting what the server
asked (``Retry-After`` / ``retry-after-ms``) or backing off exponentially with jitter when
it said nothing, within ``max_wait_s`` of waiting per request. The record keeps how many
retries and how long they waited; its ``sent`` stays the first try's, so TTFT and E2E
include the retries (the latency a user would see) and schedule lag stays the client's.

Not retried: an exhausted quota (retrying cannot help) and any 429 that arrives after a
token did (re-sending would measure a different request).
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Awaitable, Callable, Mapping

from scenarios.providers.base import RetryPolicy
from workers.client.errors import ErrorClass, RequestFailure, http_failure
from workers.client.result import RequestResult

# Markers of a spent quota or billing limit in a 429 body (OpenAI/Azure, Fireworks, others).
_QUOTA_MARKERS = (b"insufficient_quota", b"quota exceeded", b"exceeded your current quota")


class StatusFailure(RequestFailure):
    """A non-2xx answer, with what the server said about retrying it."""

    def __init__(
        self, failure: RequestFailure, retry_after_s: float | None, quota_exhausted: bool
    ) -> None:
        super().__init__(failure.error_class, failure.message, failure.http_status)
        self.retry_after_s = retry_after_s
        self.quota_exhausted = quota_exhausted


def status_failure(
    status: int, headers: Mapping[str, str], body: bytes, secrets: tuple[str, ...]
) -> StatusFailure:
    """The classified failure of an error answer, keeping its Retry-After."""
    lowered = body.lower()
    return StatusFailure(
        http_failure(status, body, secrets),
        retry_after_seconds(headers),
        status == 429 and any(marker in lowered for marker in _QUOTA_MARKERS),
    )


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked to wait: ``retry-after-ms`` (Azure), else ``Retry-After``
    as delta-seconds or an HTTP date; None when absent or unreadable."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _retryable(result: RequestResult) -> bool:
    failure = result.failure
    if failure is None or failure.error_class != ErrorClass.HTTP_429:
        return False
    if result.first_token is not None:
        return False
    return not (isinstance(failure, StatusFailure) and failure.quota_exhausted)


def next_delay(policy: RetryPolicy, result: RequestResult, retries: int) -> float:
    """Seconds to wait before retry number ``retries + 1``."""
    failure = result.failure
    if isinstance(failure, StatusFailure) and failure.retry_after_s is not None:
        return failure.retry_after_s
    # Jitter keeps virtual users that were refused together from retrying together.
    return policy.initial_backoff_s * (2.0**retries) * random.uniform(0.5, 1.0)


async def measure_with_retry(
    policy: RetryPolicy | None, attempt: Callable[[], Awaitable[RequestResult]]
) -> RequestResult:
    """Run ``attempt``; with a policy, re-run it after retryable 429 answers."""
    result = await attempt()
    if policy is None:
        return result
    first_sent = result.sent
    retries = 0
    waited_ns = 0
    while retries < policy.max_retries and _retryable(result):
        delay = next_delay(policy, result, retries)
        if waited_ns / 1e9 + delay > policy.max_wait_s:
            break  # the server wants more waiting than allowed: keep the 429 as recorded
        start = time.perf_counter_ns()
        try:
            await asyncio.sleep(delay)
        except asyncio.CancelledError:
            waited_ns += time.perf_counter_ns() - start
            result.failure = RequestFailure(
                ErrorClass.CANCELLED, "cancelled while waiting to retry"
            )
            break
        waited_ns += time.perf_counter_ns() - start
        retries += 1
        result = await attempt()
    result.sent = first_sent
    result.retries = retries
    result.retry_wait_ns = waited_ns
    return result
