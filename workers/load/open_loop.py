"""Open-loop load: requests start at their scheduled times, whatever the server does.

The schedule (``workers/load/schedule.py``) gives each arrival an offset from one start
stamp; its intended start is ``start + offset``, fixed before anything is sent. The
dispatcher sleeps until each absolute deadline (re-checked after waking, since timers
may fire early or round to the millisecond) and launches the request as a task, so a
slow server never delays the next send: the client does not coordinate with the
server (coordinated omission, docs/load.md). Every lateness, the dispatcher's own included,
is in the record as schedule lag = sent − intended start.

With ``max_in_flight``, an arrival that finds the cap full waits for a slot; it keeps
its intended start, so the wait shows as schedule lag and the intent-based latencies
include it. In a stage bounded by ``duration_s`` such waits end with the stage: arrivals
still waiting then are not sent and are counted (``not_sent``), never silently lost.
``send_lags_ns`` keeps each request's lateness beyond the cap's waits (sent − the later
of its intended start and the moment the latest wait ended): the client's own share of
the lag, which the ``client-bound`` rule judges (docs/load.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Generic, TypeVar

from workers.client.errors import ErrorClass
from workers.client.result import RequestResult
from workers.load.intended import IntendedStarts
from workers.load.quantiles import LogHistogram

__all__ = ["OpenLoop", "sleep_until"]

# Longest single sleep: bounds how long a stop request waits at low rates.
_MAX_SLEEP_NS = 250_000_000

Unit = TypeVar("Unit")  # what one arrival runs: a PlannedRequest, or a PlannedSession


async def sleep_until(deadline_ns: int, stopped: Callable[[], bool] = lambda: False) -> None:
    """Return at ``deadline_ns`` (perf_counter_ns) or just after, never before."""
    now = time.perf_counter_ns()
    while now < deadline_ns and not stopped():
        await asyncio.sleep(min(deadline_ns - now, _MAX_SLEEP_NS) / 1e9)
        now = time.perf_counter_ns()


class OpenLoop(Generic[Unit]):
    """Sends ``arrivals`` (``(seq, offset_ns)`` in offset order) at their offsets from
    the start, each request planned by ``plan`` (with sessions, each arrival is a
    session and ``send`` runs its turns; the cap then counts sessions in flight)."""

    kind = "open"

    def __init__(
        self,
        arrivals: Iterator[tuple[int, int]],
        plan: Callable[[int], Unit],
        max_in_flight: int | None = None,
        duration_s: float | None = None,
    ) -> None:
        self._arrivals = arrivals
        self._plan = plan
        self._cap = max_in_flight
        self._duration_ns = None if duration_s is None else round(duration_s * 1e9)
        self.stopped = False
        self.start_ns = 0
        # Intended starts of the arrivals sent, as counts (bounded memory at any length).
        self.intended = IntendedStarts()
        self.cap_waits = 0
        self.not_sent = 0
        self.send_lags_ns = LogHistogram()  # sent − release (intent, or a freed slot)
        self._slot_freed_at = 0
        self._slot_freed = asyncio.Event()
        self._active = 0  # requests in flight (a counter: task done-callbacks run late)

    def stop(self) -> None:
        """Send no further requests (in-flight ones complete)."""
        self.stopped = True

    async def run(
        self,
        send: Callable[[Unit, int], Awaitable[RequestResult]],
        record: Callable[[Unit, RequestResult], None],
    ) -> None:
        """Dispatch every arrival on schedule; return when all sent requests ended."""
        in_flight: set[asyncio.Task[None]] = set()

        async def one(request: Unit, intended: int, released: int) -> None:
            try:
                result = await send(request, intended)
                self.send_lags_ns.add(result.sent - released)
                record(request, result)
                if result.failure is not None and result.failure.error_class is (
                    ErrorClass.CANCELLED
                ):
                    self.stop()  # the shard is being torn down: send nothing more
            finally:
                self._active -= 1
                self._slot_freed_at = time.perf_counter_ns()
                self._slot_freed.set()

        self.start_ns = time.perf_counter_ns()
        self.intended.begin(self.start_ns, self._duration_ns)
        stage_end = None if self._duration_ns is None else self.start_ns + self._duration_ns
        held_until = 0  # when the latest cap wait ended
        for seq, offset in self._arrivals:
            request = self._plan(seq)  # planned before its deadline: not in the lag
            intended = self.start_ns + offset
            await sleep_until(intended, lambda: self.stopped)
            if self.stopped:
                break
            waits = self.cap_waits
            if self._cap is not None and not await self._wait_for_slot(stage_end):
                if not self.stopped:
                    self.not_sent += 1 + sum(1 for _ in self._arrivals)
                break
            # A request that waited for the cap is due when its slot freed, not before, and
            # so is every arrival queued behind it (the dispatcher sends in order).
            if self.cap_waits > waits:
                held_until = max(held_until, self._slot_freed_at)
            released = max(intended, held_until)
            self.intended.append(intended)
            self._active += 1
            task = asyncio.create_task(one(request, intended, released))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
        if in_flight:
            await asyncio.gather(*in_flight)

    async def _wait_for_slot(self, end: int | None) -> bool:
        """Wait until fewer than the cap are in flight; False if the stage ended (or was
        stopped) first."""
        assert self._cap is not None
        if self._active < self._cap:
            return True
        self.cap_waits += 1
        while self._active >= self._cap:
            if self.stopped:
                return False
            timeout_ns = _MAX_SLEEP_NS
            if end is not None:
                timeout_ns = min(timeout_ns, end - time.perf_counter_ns())
                if timeout_ns <= 0:
                    return False
            self._slot_freed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._slot_freed.wait(), timeout_ns / 1e9)
        return True

    def scheduled_span_ns(self) -> int:
        """From the first to the last intended start of the arrivals sent."""
        first, last = self.intended.first, self.intended.latest
        return last - first if first is not None and last is not None else 0

    def planned_end_ns(self) -> int:
        """The stage's end: start + duration, else the last intended start."""
        if self._duration_ns is not None:
            return self.start_ns + self._duration_ns
        return self.intended.latest if self.intended.latest is not None else self.start_ns
