"""A shard's live progress: requests done, errors, and its running median TTFT.

The median is the shard's own figure, over every successful request of the attempt so
far (not a recent window), so the live view shows what the report will: a shard's report
TTFT p50 is the median of the same requests. It is kept in log-spaced buckets
``GROWTH`` apart, each counted by the value ``2·g^b / (g + 1)`` within ``RELATIVE_ERROR``
of every value in it (the DDSketch construction), so the memory stays a few thousand
counters whatever the shard's size and the median is within ``RELATIVE_ERROR`` of the
exact one.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from workers.client.result import RequestResult

GROWTH = 1.01
RELATIVE_ERROR = (GROWTH - 1) / (GROWTH + 1)  # 0.5 %
_LOG_GROWTH = math.log(GROWTH)
_ZERO = -(10**9)  # bucket of values <= 0 (a clock step), represented by 0


def _bucket(value: float) -> int:
    return math.ceil(math.log(value) / _LOG_GROWTH) if value > 0 else _ZERO


def _value(bucket: int) -> float:
    return 0.0 if bucket == _ZERO else 2 * GROWTH**bucket / (GROWTH + 1)


@dataclass
class Progress:
    """Counts of one shard attempt, updated per request and read once a second."""

    done: int = 0
    errors: int = 0
    ttft_buckets: Counter[int] = field(default_factory=Counter)
    ttft_count: int = 0

    def add(self, result: RequestResult) -> None:
        """Count one request."""
        self.done += 1
        if result.failure is not None:
            self.errors += 1
        elif result.first_token is not None:
            self.ttft_buckets[_bucket((result.first_token - result.sent) / 1e6)] += 1
            self.ttft_count += 1

    def ttft_p50(self) -> float:
        """Median TTFT in ms of the successful requests so far, within RELATIVE_ERROR
        (interpolated between the two middle ones as the report's ``quantile_cont``);
        -1 before the first."""
        if not self.ttft_count:
            return -1.0
        low, high = (self.ttft_count - 1) // 2, self.ttft_count // 2
        found: list[float] = []
        seen = 0
        for bucket in sorted(self.ttft_buckets):
            seen += self.ttft_buckets[bucket]
            while len(found) < 2 and seen > (low, high)[len(found)]:
                found.append(_value(bucket))
            if len(found) == 2:
                break
        return round((found[0] + found[1]) / 2, 3)
