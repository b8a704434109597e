"""Closed-loop load: N virtual users, each sending its next request when the last ends.

The closed loop knows nothing of HTTP or Redis: it draws planned requests, calls ``send``
and hands each result to ``record``. For a closed loop the intended start of a request
is the moment its user's slot freed (docs/metrics.md), so schedule lag measures only the
client's own delay between a slot freeing and the request going out. The open loop is
``workers/load/open_loop.py``; both have the interface of ``workers.load.LoadShape``.
Both are generic in what they schedule: a planned request, or a planned session whose
``send`` runs all its turns (``workers/load/sessions.py``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from workers.client.errors import ErrorClass
from workers.client.result import RequestResult
from workers.load.intended import IntendedStarts

Unit = TypeVar("Unit")  # what one slot runs: a PlannedRequest, or a PlannedSession


class RequestSource(Generic[Unit]):
    """Hands out request sequence numbers until the count or the deadline is reached,
    or until :meth:`stop` is called."""

    def __init__(
        self,
        plan: Callable[[int], Unit],
        seq_start: int,
        count: int | None,
        duration_s: float | None,
    ) -> None:
        self._plan = plan
        self._next = seq_start
        self._end = None if count is None else seq_start + count
        self._deadline = None if duration_s is None else time.perf_counter() + duration_s
        self.stopped = False

    def next(self) -> Unit | None:
        """The next request to send, or None when the stage is over for this shard."""
        if self.stopped or (self._end is not None and self._next >= self._end):
            return None
        if self._deadline is not None and time.perf_counter() >= self._deadline:
            return None
        seq = self._next
        self._next += 1
        return self._plan(seq)

    def stop(self) -> None:
        """Issue no further requests (in-flight ones complete)."""
        self.stopped = True


async def run_closed_loop(
    concurrency: int,
    source: RequestSource[Unit],
    send: Callable[[Unit, int], Awaitable[RequestResult]],
    record: Callable[[Unit, RequestResult], None],
) -> None:
    """Run ``concurrency`` virtual users until ``source`` is exhausted."""

    async def user() -> None:
        intended = time.perf_counter_ns()
        while (request := source.next()) is not None:
            result = await send(request, intended)
            record(request, result)
            if result.failure is not None and result.failure.error_class is ErrorClass.CANCELLED:
                source.stop()  # the shard is being torn down: send nothing more
            intended = time.perf_counter_ns()

    await asyncio.gather(*(user() for _ in range(concurrency)))


@dataclass
class ClosedLoop(Generic[Unit]):
    """``concurrency`` virtual users drawing from ``source``, as a load shape."""

    concurrency: int
    source: RequestSource[Unit]
    duration_s: float | None = None
    kind: str = "closed"
    start_ns: int = 0
    # Intended starts, as counts (bounded memory at any length).
    intended: IntendedStarts = field(default_factory=IntendedStarts)

    @property
    def stopped(self) -> bool:
        """True once stopped (a cancelled run)."""
        return self.source.stopped

    def stop(self) -> None:
        """Send no further requests (in-flight ones complete)."""
        self.source.stop()

    async def run(
        self,
        send: Callable[[Unit, int], Awaitable[RequestResult]],
        record: Callable[[Unit, RequestResult], None],
    ) -> None:
        """Run the virtual users until the source is exhausted."""

        async def tracked(request: Unit, intended: int) -> RequestResult:
            self.intended.append(intended)
            return await send(request, intended)

        self.start_ns = time.perf_counter_ns()
        duration_ns = None if self.duration_s is None else round(self.duration_s * 1e9)
        self.intended.begin(self.start_ns, duration_ns)
        await run_closed_loop(self.concurrency, self.source, tracked, record)

    def planned_end_ns(self) -> int:
        """The stage's end: start + duration, else the last request's start."""
        if self.duration_s is not None:
            return self.start_ns + round(self.duration_s * 1e9)
        return self.intended.max if self.intended.max is not None else self.start_ns
