"""A shard's measurement of its own client: did the load generator distort its figures?

While a shard runs, a probe task wakes on an absolute 20 ms grid and records how late
each wake-up was (event-loop lag) and, for wake-ups at least ``STALL_MIN_NS`` late, the
stretch since its previous wake-up (the loop was busy or not running: a late window).
The transport reports the stretches in which the client did not read its sockets
(``READ_GAPS``). Each request adds its schedule lag (sent − intended start) and its token
stamps. ``summary()`` turns them into the ``shard_finished`` fields of docs/load.md and
the ``client-bound`` verdict of ``scenarios.load.client_bound``.

Why gaps and token stamps: arrival stamps are the kernel's receive times
(``workers/client/transport/arrival.py``), so a late read by itself costs nothing. It
costs when a stream's next write lands while its previous one is still unread: the
kernel merges them and both tokens get the later stamp. Two token events of one stream
with the same stamp are such a merge, or a server that wrote them together. A merge is
counted as the client's (``merged_tokens``) when its stamp lies in a read stall — a read
gap in a late window, so not an idle loop — at least as long as the stream's cadence
(mean gap between its tokens): a shorter stall cannot keep two writes made on cadence
apart, so a merge in it is the server's burst.

Shards sharing a worker process share its loop, so each sees the load of all of them,
which is the point: a saturated loop spoils every shard on it.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import threading
import time
from array import array
from collections.abc import Iterable
from dataclasses import dataclass

import psutil

from scenarios.load.client_bound import ClientHealth, client_bound_note, client_bound_reasons
from workers.client.prewarm import Prewarmed
from workers.client.result import RequestResult
from workers.client.transport.arrival import READ_GAP_MIN_NS, READ_GAPS, SO_TIMESTAMPNS
from workers.load.quantiles import LogHistogram
from workers.runtime import gc_tuning
from workers.shard.spans import Spans

__all__ = ["KERNEL_STAMPS", "PROBE_INTERVAL_NS", "STALL_MIN_NS", "ShardHealth", "percentile"]

PROBE_INTERVAL_NS = 20_000_000
# A wake-up at least this late opens a late window; shorter stalls err by less than the
# client's stated accuracy (docs/load.md), as shorter read gaps do.
STALL_MIN_NS = READ_GAP_MIN_NS
# The backlog of a stall is read in the moments after the first read that ended it: a
# merged stamp this long after the gap still belongs to it.
_STALL_TAIL_NS = 5_000_000
# Merges stamped this long ago are settled into counts (bounded memory in long stages):
# the late window of the stall a merge lies in is recorded within this.
_SETTLE_AFTER_NS = 1_000_000_000
# Read gaps and late windows are kept this long past a request's timeout (the loop can
# run late between a request's end and its result reaching the monitor).
_KEEP_MARGIN_NS = 30_000_000_000
# Whether the worker's client (the arrival transport) gets kernel receive stamps here.
KERNEL_STAMPS = SO_TIMESTAMPNS is not None


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


@dataclass(frozen=True, slots=True)
class _Merge:
    """A token stamp shared with the stream's next token event."""

    stamp: int
    gap_ns: int  # since the stream's previous distinct stamp (or the send): bounds the error
    cadence_ns: int  # the stream's mean gap between token events
    ttft_ns: int | None  # the stream's TTFT (from the send) when this is its first token


class ShardHealth:
    """Collects the health figures of one shard attempt; use as an async context.

    ``kernel_stamps`` says whether arrival stamps are the kernel's receive times (the
    arrival transport on Linux); without them every stamp is late by the loop's lag.
    """

    def __init__(
        self, *, kernel_stamps: bool = KERNEL_STAMPS, longest_request_s: float | None = None
    ) -> None:
        self.kernel_stamps = kernel_stamps
        # Read gaps and late windows older than any request still running can need are
        # let go (counted): a request's token stamps lie within its timeout of its end,
        # when it reaches the monitor. None keeps every one.
        self._keep_ns = (
            None
            if longest_request_s is None
            else round((longest_request_s + _SETTLE_AFTER_NS / 1e9) * 1e9) + _KEEP_MARGIN_NS
        )
        self._dropped_read_stalls = 0
        # Per-request and per-probe figures in bounded histograms (workers/load/quantiles.py):
        # a shard of any length holds the same memory (docs/load.md, "Memory").
        self.loop_lags_ns = LogHistogram()
        self.late_windows = Spans()  # (probe last ran, woke late), in order
        self.read_gaps = Spans()  # (last read, next read), in order
        self.schedule_lags_ns = LogHistogram()
        self.sent_stamps = LogHistogram()  # count, first and last (the achieved rate)
        self.token_events = 0
        self.ttfts_ns = LogHistogram()  # from the send
        self.prewarmed = Prewarmed(0, 0.0)  # set by the shard before the window opens
        self.merges: list[_Merge] = []  # not yet settled (see _settle)
        # Settled in the probe once old enough (bounded memory in long stages).
        self._settled_shared = 0
        self._settled_bounds = LogHistogram()  # error bounds of the client's merges
        self._settled_first_ttfts = array("q")  # of those, first tokens: TTFT, bound
        self._settled_first_bounds = array("q")
        # Closed loop, successful requests only (the rates are theirs): the client's delay
        # before each send, and the time from send to end.
        self._waited_ns = 0
        self._busy_ns = 0
        self._stop = asyncio.Event()
        self._next_settle = time.perf_counter_ns() + _SETTLE_AFTER_NS
        self._probe: asyncio.Task[None] | None = None
        self._process = psutil.Process()
        self._thread_id = 0
        self._start: _CpuMark | None = None
        self._end: _CpuMark | None = None

    async def __aenter__(self) -> ShardHealth:
        self._thread_id = threading.get_native_id()  # the event loop's thread
        self._start = self._cpu_mark()
        READ_GAPS.sinks.append(self.read_gaps)
        self._probe = asyncio.create_task(self._run_probe())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._stop.set()  # an event, not cancel(): see workers/shard/execute.py
        if self._probe is not None:
            await self._probe
        self._end = self._cpu_mark()
        if self._end.wall_ns - READ_GAPS.last >= READ_GAPS.min_ns:
            self.read_gaps.add(READ_GAPS.last, self._end.wall_ns)  # still open
        # By identity: another shard's (equal, e.g. empty) list must stay registered.
        READ_GAPS.sinks[:] = [sink for sink in READ_GAPS.sinks if sink is not self.read_gaps]

    def add(self, result: RequestResult) -> None:
        """Account for one request: its start and its token stamps."""
        self.schedule_lags_ns.add(result.sent - result.intended_start)
        self.sent_stamps.add(result.sent)
        if result.ok:
            self._waited_ns += max(0, result.sent - result.intended_start)
            self._busy_ns += max(0, (result.end or result.sent) - result.sent)
        stamps = result.token_stamps
        if not stamps:
            return
        self.token_events += len(stamps)
        ttft = stamps[0] - result.sent
        self.ttfts_ns.add(ttft)
        if len(set(stamps)) == len(stamps):
            return  # every token in its own read: the usual case, checked in C
        cadence = (stamps[-1] - stamps[0]) // (len(stamps) - 1)
        before = result.sent
        for i in range(len(stamps) - 1):
            stamp = stamps[i]
            if i and stamp != stamps[i - 1]:
                before = stamps[i - 1]
            if stamp == stamps[i + 1]:
                self.merges.append(_Merge(stamp, stamp - before, cadence, None if i else ttft))

    async def _run_probe(self) -> None:
        # Absolute deadlines: a late wake-up is measured, then the grid re-anchors so one
        # long stall counts once rather than as a burst of catch-up samples.
        now = time.perf_counter_ns
        seen = now()
        deadline = seen + PROBE_INTERVAL_NS
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), (deadline - now()) / 1e9)
            if self._stop.is_set():
                return
            woke = now()
            lag = max(0, woke - deadline)
            self.loop_lags_ns.add(lag)
            if lag >= STALL_MIN_NS:
                # Ran at ``seen``, then not when due: busy or descheduled in between.
                self.late_windows.add(seen, woke)
            seen = woke
            if woke >= self._next_settle:
                self._settle(woke - _SETTLE_AFTER_NS)
                if self._keep_ns is not None:
                    self._let_go(woke - self._keep_ns)
                self._next_settle = woke + _SETTLE_AFTER_NS
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

    def _settle(self, before: int) -> None:
        """Fold the merges stamped before ``before`` into counts and bounds. Read gaps and
        late windows are kept longer (see _let_go): a merge reaches the monitor only when
        its request ends, which may be long after its stamp, and must still meet the
        stall it lies in. By ``before`` that stall was recorded."""
        settled = [merge for merge in self.merges if merge.stamp < before]
        if settled:
            self.merges = [merge for merge in self.merges if merge.stamp >= before]
            self._settled_shared += len(settled)
            for merge, bound in self._client_merges(settled):
                self._settled_bounds.add(bound)
                if merge.ttft_ns is not None:
                    self._settled_first_ttfts.append(merge.ttft_ns)
                    self._settled_first_bounds.append(bound)

    def _let_go(self, horizon: int) -> None:
        """Drop the read gaps that ended before ``horizon`` (their stalls counted first)
        and the late windows no kept gap can overlap: no merge still to come lies there."""
        gone = self.read_gaps.first_ending_at_or_after(horizon)
        if gone:
            self._dropped_read_stalls += len(self._stalls(self.read_gaps.between(0, gone)))
            self.read_gaps.drop_ending_before(horizon)
        kept_from = self.read_gaps.starts[0] if self.read_gaps else horizon
        self.late_windows.drop_ending_before(min(horizon, kept_from))

    def read_stalls(self) -> list[tuple[int, int, int]]:
        """``(start, end, length)`` of every read gap held that overlaps a late window (so
        the loop was busy or descheduled, not idle): its length is the shorter of the gap
        and the window, which bounds how long bytes can have waited unread."""
        return self._stalls(iter(self.read_gaps))

    def _stalls(self, gaps: Iterable[tuple[int, int]]) -> list[tuple[int, int, int]]:
        stalls = []
        windows = self.late_windows
        seens, wokes = windows.starts, windows.ends
        for start, end in gaps:
            longest = 0
            index = windows.first_ending_at_or_after(start)
            while index < len(seens) and seens[index] <= end:
                longest = max(longest, wokes[index] - seens[index])
                index += 1
            if longest:
                stalls.append((start, end, min(end - start, longest)))
        return stalls

    def client_merges(self) -> list[tuple[_Merge, int]]:
        """The merges the client caused, each with its error bound (ns): the shorter of
        the read stall and the gap the merged token closed (those not yet settled)."""
        return self._client_merges(self.merges)

    def _client_merges(self, merges: list[_Merge]) -> list[tuple[_Merge, int]]:
        if not merges:
            return []
        # Only the gaps the merges' stamps can lie in (gaps are in time order): settling
        # every second costs the span of its merges, not the stage's length.
        low = min(merge.stamp for merge in merges) - _STALL_TAIL_NS
        high = max(merge.stamp for merge in merges)
        first = self.read_gaps.first_ending_at_or_after(low)
        last = self.read_gaps.after_last_starting_at_or_before(high)
        stalls = self._stalls(self.read_gaps.between(first, last))
        starts = [start for start, _, _ in stalls]
        found = []
        for merge in merges:
            index = bisect.bisect_right(starts, merge.stamp) - 1
            if index < 0:
                continue
            _, end, length = stalls[index]
            if merge.stamp <= end + _STALL_TAIL_NS and length >= merge.cadence_ns:
                found.append((merge, min(merge.gap_ns, length)))
        return found

    def summary(
        self,
        *,
        target_rps: float | None = None,
        scheduled_rps: float | None = None,
        cap_waits: int = 0,
        not_sent: int = 0,
        send_lags_ns: LogHistogram | None = None,
    ) -> dict[str, str | int | float]:
        """The shard's health fields (names documented in docs/load.md).

        ``send_lags_ns`` is an open loop's lateness of each send beyond any cap wait;
        without it (a closed loop) the schedule lag is the client's own lateness.
        """
        start, end = self._start, self._end or self._cpu_mark()
        assert start is not None, "summary() of a monitor that never ran"
        wall_s = max((end.wall_ns - start.wall_ns) / 1e9, 1e-9)
        loop_cpu = (
            (end.thread_s - start.thread_s) / wall_s
            if end.thread_s is not None and start.thread_s is not None
            else -1.0
        )
        achieved = _rate(self.sent_stamps)
        open_loop = send_lags_ns is not None
        send_lags = self.schedule_lags_ns if send_lags_ns is None else send_lags_ns
        merges = self.client_merges()  # and the settled ones, counted in _settle
        # The TTFT tail: first tokens at or above the p99, which set it.
        ttft_p99 = self.ttfts_ns.percentile(0.99)
        first_merges = [
            *zip(self._settled_first_ttfts, self._settled_first_bounds, strict=True),
            *((merge.ttft_ns, bound) for merge, bound in merges if merge.ttft_ns is not None),
        ]
        tail_merges = [bound for ttft, bound in first_merges if ttft >= ttft_p99]
        bounds = [bound for _, bound in merges]
        if self._settled_bounds.count:  # a long stage: settled bounds are in buckets
            histogram = self._settled_bounds.copy()
            for bound in bounds:
                histogram.add(bound)
            merge_error_p99 = histogram.percentile(0.99)
        else:
            merge_error_p99 = percentile(bounds, 0.99)
        health = ClientHealth(
            load_kind="open" if open_loop else "closed",
            loop_lag_p99_ms=self.loop_lags_ns.percentile(0.99) / 1e6,
            loop_cpu_util=loop_cpu,
            schedule_lag_p99_ms=self.schedule_lags_ns.percentile(0.99) / 1e6,
            send_lag_p99_ms=send_lags.percentile(0.99) / 1e6,
            # Closed loop: a user's cycle is the client's delay, then the request.
            send_lag_share=(
                0.0 if open_loop else self._waited_ns / max(1, self._waited_ns + self._busy_ns)
            ),
            scheduled_rps=scheduled_rps,
            achieved_rps=achieved,
            cap_waits=cap_waits,
            requests_sent=len(self.sent_stamps),
            not_sent=not_sent,
            token_events=self.token_events,
            merged_tokens=self._settled_bounds.count + len(merges),
            first_tokens=len(self.ttfts_ns),
            merged_first_tokens=len(first_merges),
            merge_error_p99_ms=merge_error_p99 / 1e6,
            ttft_tail=self.ttfts_ns.count_at_least(ttft_p99),
            merged_ttft_tail=len(tail_merges),
            merge_error_ttft_ms=max(tail_merges, default=0) / 1e6,
            kernel_stamps=self.kernel_stamps,
        )
        reasons = client_bound_reasons(health)
        fields: dict[str, str | int | float] = {
            "loop_lag_p50_ms": round(self.loop_lags_ns.percentile(0.5) / 1e6, 3),
            "loop_lag_p99_ms": round(health.loop_lag_p99_ms, 3),
            "loop_lag_max_ms": round((self.loop_lags_ns.max or 0) / 1e6, 3),
            "loop_stalls": self.late_windows.total,
            "read_stalls": self._dropped_read_stalls + len(self.read_stalls()),
            "loop_cpu_util": round(loop_cpu, 3),
            "process_cpu_util": round((end.process_s - start.process_s) / wall_s, 3),
            "schedule_lag_p50_ms": round(self.schedule_lags_ns.percentile(0.5) / 1e6, 3),
            "schedule_lag_p99_ms": round(health.schedule_lag_p99_ms, 3),
            "send_lag_p99_ms": round(health.send_lag_p99_ms, 3),
            "send_lag_share": round(health.send_lag_share, 4),
            "cap_waits": cap_waits,
            "requests_sent": health.requests_sent,
            "not_sent": not_sent,
            "token_events": health.token_events,
            "first_tokens": health.first_tokens,
            "shared_stamps": self._settled_shared + len(self.merges),
            "merged_tokens": health.merged_tokens,
            "merged_first_tokens": health.merged_first_tokens,
            "merge_error_p99_ms": round(health.merge_error_p99_ms, 3),
            "ttft_tail": health.ttft_tail,
            "merged_ttft_tail": health.merged_ttft_tail,
            "merge_error_ttft_ms": round(health.merge_error_ttft_ms, 3),
            "kernel_stamps": int(self.kernel_stamps),
            "client_bound": int(bool(reasons)),
            "client_bound_reasons": ",".join(reasons),
            "client_bound_note": client_bound_note(health),
            **self.prewarmed.fields(),
            **gc_tuning.pauses.window(start.wall_ns, end.wall_ns),
        }
        for name, value in (
            ("target_rps", target_rps),
            ("scheduled_rps", scheduled_rps),
            ("achieved_rps", achieved),
        ):
            if value is not None:
                fields[name] = round(value, 4)
        return fields


def _rate(stamps: LogHistogram) -> float | None:
    """Events per second over the span of ``stamps`` (None with fewer than two)."""
    if stamps.count < 2 or stamps.max is None or stamps.min is None:
        return None
    span = stamps.max - stamps.min
    return (stamps.count - 1) / (span / 1e9) if span > 0 else None
