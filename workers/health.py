"""A shard's measurement of its own client: is the load generator the bottleneck?

While a shard runs, a probe task wakes on an absolute 20 ms grid and records how late
each wake-up was (event-loop lag: every stamp the loop takes is late by as much), the
event-loop thread's and the process's CPU utilisation are sampled from the OS, and each
request's schedule lag (sent − intended start) is kept. ``summary()`` turns them into the
``shard_finished`` fields of docs/load.md, including the ``client-bound`` verdict of
``scenarios.calibration``. Shards sharing a worker process share its loop, so each sees
the load of all of them, which is the point: a saturated loop spoils every shard on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from dataclasses import dataclass

import psutil

from scenarios.calibration import ClientHealth, client_bound_reasons

__all__ = ["PROBE_INTERVAL_NS", "ShardHealth", "percentile"]

PROBE_INTERVAL_NS = 20_000_000


def percentile(values: list[int], q: float) -> float:
    """Linear-interpolated percentile (numpy's default) of ``values``; 0.0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass
class _CpuMark:
    wall_ns: int
    process_s: float
    thread_s: float | None


class ShardHealth:
    """Collects the health figures of one shard attempt; use as an async context."""

    def __init__(self) -> None:
        self.loop_lags_ns: list[int] = []
        self.schedule_lags_ns: list[int] = []
        self.sent_stamps: list[int] = []
        self._stop = asyncio.Event()
        self._probe: asyncio.Task[None] | None = None
        self._process = psutil.Process()
        self._thread_id = 0
        self._start: _CpuMark | None = None
        self._end: _CpuMark | None = None

    async def __aenter__(self) -> ShardHealth:
        self._thread_id = threading.get_native_id()  # the event loop's thread
        self._start = self._cpu_mark()
        self._probe = asyncio.create_task(self._run_probe())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._stop.set()  # an event, not cancel(): see workers/shard.py
        if self._probe is not None:
            await self._probe
        self._end = self._cpu_mark()

    def add(self, intended_start: int, sent: int) -> None:
        """Account for one request's start."""
        self.schedule_lags_ns.append(sent - intended_start)
        self.sent_stamps.append(sent)

    async def _run_probe(self) -> None:
        # Absolute deadlines: a late wake-up is measured, then the grid re-anchors so one
        # long stall counts once rather than as a burst of catch-up samples.
        now = time.perf_counter_ns
        deadline = now() + PROBE_INTERVAL_NS
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), (deadline - now()) / 1e9)
            if self._stop.is_set():
                return
            woke = now()
            self.loop_lags_ns.append(max(0, woke - deadline))
            deadline += PROBE_INTERVAL_NS
            if deadline <= woke:
                deadline = woke + PROBE_INTERVAL_NS

    def _cpu_mark(self) -> _CpuMark:
        times = self._process.cpu_times()
        thread_s = None
        with contextlib.suppress(psutil.Error, AttributeError):
            for thread in self._process.threads():
                if thread.id == self._thread_id:
                    thread_s = thread.user_time + thread.system_time
        return _CpuMark(time.perf_counter_ns(), times.user + times.system, thread_s)

    def summary(
        self,
        *,
        target_rps: float | None = None,
        scheduled_rps: float | None = None,
        cap_waits: int = 0,
        not_sent: int = 0,
    ) -> dict[str, str | int | float]:
        """The shard's health fields (names documented in docs/load.md)."""
        start, end = self._start, self._end or self._cpu_mark()
        assert start is not None, "summary() of a monitor that never ran"
        wall_s = max((end.wall_ns - start.wall_ns) / 1e9, 1e-9)
        loop_cpu = (
            (end.thread_s - start.thread_s) / wall_s
            if end.thread_s is not None and start.thread_s is not None
            else -1.0
        )
        achieved = _rate(self.sent_stamps)
        health = ClientHealth(
            loop_lag_p99_ms=percentile(self.loop_lags_ns, 0.99) / 1e6,
            loop_cpu_util=loop_cpu,
            schedule_lag_p99_ms=percentile(self.schedule_lags_ns, 0.99) / 1e6,
            scheduled_rps=scheduled_rps,
            achieved_rps=achieved,
            cap_waits=cap_waits,
            not_sent=not_sent,
        )
        reasons = client_bound_reasons(health)
        fields: dict[str, str | int | float] = {
            "loop_lag_p50_ms": round(percentile(self.loop_lags_ns, 0.5) / 1e6, 3),
            "loop_lag_p99_ms": round(health.loop_lag_p99_ms, 3),
            "loop_lag_max_ms": round(max(self.loop_lags_ns, default=0) / 1e6, 3),
            "loop_cpu_util": round(loop_cpu, 3),
            "process_cpu_util": round((end.process_s - start.process_s) / wall_s, 3),
            "schedule_lag_p50_ms": round(percentile(self.schedule_lags_ns, 0.5) / 1e6, 3),
            "schedule_lag_p99_ms": round(health.schedule_lag_p99_ms, 3),
            "cap_waits": cap_waits,
            "not_sent": not_sent,
            "client_bound": int(bool(reasons)),
            "client_bound_reasons": ",".join(reasons),
        }
        for name, value in (
            ("target_rps", target_rps),
            ("scheduled_rps", scheduled_rps),
            ("achieved_rps", achieved),
        ):
            if value is not None:
                fields[name] = round(value, 4)
        return fields


def _rate(stamps: list[int]) -> float | None:
    """Events per second over the span of ``stamps`` (None with fewer than two)."""
    if len(stamps) < 2:
        return None
    span = max(stamps) - min(stamps)
    return (len(stamps) - 1) / (span / 1e9) if span > 0 else None
