"""A token's API request rate: a token bucket per token id, in memory, bounded.

Each authenticated request takes one unit from its token's bucket, which holds at most
``request_burst`` units and refills at ``requests_per_s`` (``settings.teams``). An
empty bucket is a **429** with ``Retry-After``, the seconds until a unit is back. The
check runs right after authentication (``api/rest/auth.py`` calls :func:`check_rate`), so
an unauthenticated request is a cheap 401 and never fills a bucket of its own.

The buckets are a least-recently-used map of at most ``max_buckets`` entries: a token
unseen for longest loses its bucket first (it comes back full, which never lets a busy
token past its rate). The figures are per control-plane process; a restart refills them.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable

from fastapi import Request

from api.access.caller import Caller
from scenarios.errors import QuotaExceeded
from scenarios.settings import TeamSettings

RATE_SETTING = "TOKENBENCH__TEAMS__REQUESTS_PER_S"
BURST_SETTING = "TOKENBENCH__TEAMS__REQUEST_BURST"
DEFAULT_MAX_BUCKETS = 20_000


class RateLimiter:
    """Token buckets keyed by token id."""

    def __init__(
        self,
        rate: float,
        burst: int,
        max_buckets: int = DEFAULT_MAX_BUCKETS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = rate
        self.burst = burst
        self.max_buckets = max_buckets
        self.clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    @classmethod
    def of(cls, teams: TeamSettings, bootstrap_tokens: int) -> RateLimiter:
        """The service's limiter: a bucket for every token there may be, and some."""
        return cls(
            teams.requests_per_s,
            teams.request_burst,
            max_buckets=teams.max_tokens + bootstrap_tokens + 1024,
        )

    def take(self, key: str) -> float:
        """Take one unit for ``key``: 0.0 when allowed, else the seconds until one is back."""
        now = self.clock()
        units, then = self._buckets.pop(key, (float(self.burst), now))
        units = min(float(self.burst), units + (now - then) * self.rate)
        wait = 0.0
        if units >= 1.0:
            units -= 1.0
        else:
            wait = (1.0 - units) / self.rate
        self._buckets[key] = (units, now)  # most recently used last
        while len(self._buckets) > self.max_buckets:
            self._buckets.popitem(last=False)
        return wait

    def __len__(self) -> int:
        return len(self._buckets)


def check_rate(request: Request, caller: Caller) -> None:
    """429 with ``Retry-After`` when ``caller``'s token sent more than its rate allows
    (no limiter on the app: no limit, e.g. an app built by a unit test)."""
    limiter: RateLimiter | None = getattr(request.app.state, "rate_limiter", None)
    if limiter is None:
        return
    wait = limiter.take(caller.token_id)
    if wait > 0:
        retry_after = max(1, math.ceil(wait))
        raise QuotaExceeded(
            f"token {caller.token_id} sent more than {limiter.rate:g} requests per second "
            f"(burst {limiter.burst}), its requests_per_s ({RATE_SETTING}) and "
            f"request_burst ({BURST_SETTING}): retry in {retry_after} s",
            quota="requests_per_s",
            setting=RATE_SETTING,
            retry_after_s=retry_after,
        )
