"""api/rest/rate_limit.py: a token bucket per token, refilled at the rate, bounded in
how many tokens it remembers."""

from __future__ import annotations

from api.rest.rate_limit import RateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_the_rate() -> None:
    clock = Clock()
    limiter = RateLimiter(rate=2.0, burst=3, clock=clock)
    assert [limiter.take("t") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.take("t") == 0.5  # a unit is back in half a second
    clock.now = 0.5
    assert limiter.take("t") == 0.0
    assert limiter.take("other") == 0.0  # buckets are per token


def test_the_buckets_are_bounded_least_recently_used_first() -> None:
    limiter = RateLimiter(rate=1.0, burst=1, max_buckets=2, clock=Clock())
    for key in ("a", "b", "c"):
        limiter.take(key)
    assert len(limiter) == 2
    assert limiter.take("c") > 0  # still remembered: empty
