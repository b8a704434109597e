"""The open loop's dispatcher with a fake server (no network): intended starts come from
the schedule, a slow server never delays a send, a cap's wait is schedule lag."""

from __future__ import annotations

import asyncio
import itertools
import time

from workers.client.result import RequestResult
from workers.load.open_loop import OpenLoop
from workers.prompts.plan import PlannedRequest

MS = 1_000_000


def plan(seq: int) -> PlannedRequest:
    return PlannedRequest(seq, 1, 1, "x")


def run(loop: OpenLoop, service_s: float) -> list[RequestResult]:
    results: list[RequestResult] = []

    async def send(request: PlannedRequest, intended: int) -> RequestResult:
        result = RequestResult(intended_start=intended, sent=time.perf_counter_ns())
        await asyncio.sleep(service_s)
        result.end = time.perf_counter_ns()
        return result

    asyncio.run(loop.run(send, lambda _, result: results.append(result)))
    return results


def test_intended_starts_are_the_schedule_and_a_slow_server_delays_nothing() -> None:
    offsets = [i * 20 * MS for i in range(10)]  # 50 rps
    loop = OpenLoop(iter(enumerate(offsets)), plan)
    results = run(loop, service_s=0.5)  # every answer takes 25 gaps
    assert sorted(r.intended_start - loop.start_ns for r in results) == offsets
    for result in results:
        assert result.sent >= result.intended_start  # never early
    # all ten went out before the first answer came back
    assert max(r.sent for r in results) < min(r.end or 0 for r in results)
    assert loop.cap_waits == 0 and loop.not_sent == 0


def test_a_full_cap_turns_waiting_into_schedule_lag() -> None:
    offsets = [i * 10 * MS for i in range(6)]
    loop = OpenLoop(iter(enumerate(offsets)), plan, max_in_flight=1)
    results = sorted(run(loop, service_s=0.1), key=lambda r: r.intended_start)
    assert len(results) == 6 and loop.cap_waits == 5
    # each waited for its predecessor's 100 ms answer: lag grows by ~90 ms per request
    lags_ms = [(r.sent - r.intended_start) / MS for r in results]
    assert lags_ms[-1] > 5 * 90 * 0.9
    assert all(b > a for a, b in itertools.pairwise(lags_ms))


def test_stop_sends_nothing_more() -> None:
    offsets = [i * 50 * MS for i in range(100)]
    loop = OpenLoop(iter(enumerate(offsets)), plan)

    async def main() -> int:
        sent = 0

        async def send(request: PlannedRequest, intended: int) -> RequestResult:
            nonlocal sent
            sent += 1
            if sent == 3:
                loop.stop()
            return RequestResult(intended_start=intended, sent=time.perf_counter_ns())

        await loop.run(send, lambda *_: None)
        return sent

    assert asyncio.run(main()) == 3
