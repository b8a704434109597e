"""The intended starts of a stage's requests, kept as the figures the stage needs.

The shard reports how many requests it sent, the span of its schedule (first to last
intended start), the stage's end (the latest intended start when the stage has no
duration) and how many requests were intended to start in the steady part of the
window (``workers/shard/execute.py``, ``stage_window``). An array of every start
answered all of these but grew a worker by 8 bytes a request, for ever: 14 MB an hour
at 500 req/s, which a one-hour soak showed as a rising RSS (docs/load.md, "Memory").

:class:`IntendedStarts` answers them exactly in bounded memory. The steady part is
``[start + warm-up, end − cool-down)``. Its start is known when the stage begins; its
end too when the stage has a duration. Without one, the end is the latest start minus
the cool-down, so a start more than a cool-down below the latest seen so far is below
it whatever comes next: only the starts within a cool-down of the latest are held
(8 bytes each, at most twice as many as that between compactions), the rest are
counts.
"""

from __future__ import annotations

from array import array

__all__ = ["IntendedStarts"]

_MIN_COMPACT = 1024  # held starts before the first compaction


class IntendedStarts:
    """Counts, bounds and the steady count of a stage's intended starts (perf ns).

    Call :meth:`set_window` (optional: no warm-up or cool-down by default) and then
    :meth:`begin` before the first :meth:`append`.
    """

    __slots__ = (
        "_compact_at",
        "_cooldown_ns",
        "_steady",
        "_steady_end",
        "_steady_start",
        "_tail",
        "_warmup_ns",
        "count",
        "first",
        "latest",
        "max",
    )

    def __init__(self) -> None:
        self.count = 0
        self.first: int | None = None
        self.latest: int | None = None  # the last appended (an open loop's are in order)
        self.max: int | None = None
        self._warmup_ns = 0
        self._cooldown_ns = 0
        self._steady_start: int | None = None
        self._steady_end: int | None = None  # known up front when the stage has a duration
        self._steady = 0  # starts surely inside the steady part, whatever the stage's end
        # Steady starts not yet known to lie below the steady part's end: those within a
        # cool-down of the latest, and those that fell below it since the last compaction.
        self._tail = array("q")
        self._compact_at = _MIN_COMPACT

    def set_window(self, warmup_s: float, cooldown_s: float) -> None:
        """The stage's warm-up and cool-down, before it begins."""
        if self._steady_start is not None:
            raise RuntimeError("the window is set before the stage begins")
        self._warmup_ns = round(warmup_s * 1e9)
        self._cooldown_ns = round(cooldown_s * 1e9)

    def begin(self, start_ns: int, duration_ns: int | None) -> None:
        """The stage began at ``start_ns``; it ends at start + ``duration_ns`` if given."""
        self._steady_start = start_ns + self._warmup_ns
        if duration_ns is not None:
            self._steady_end = max(self._steady_start, start_ns + duration_ns - self._cooldown_ns)

    @property
    def begun(self) -> bool:
        """Whether :meth:`begin` was called."""
        return self._steady_start is not None

    def __len__(self) -> int:
        return self.count

    def append(self, intended: int) -> None:
        """One request intended to start at ``intended``."""
        if self._steady_start is None:
            raise RuntimeError("a start appended before the stage began")
        self.count += 1
        if self.first is None:
            self.first = intended
        self.latest = intended
        if self.max is None or intended > self.max:
            self.max = intended
        if intended < self._steady_start:
            return
        if self._steady_end is not None:
            self._steady += intended < self._steady_end
            return
        self._tail.append(intended)
        if len(self._tail) >= self._compact_at:
            self._compact()

    def _compact(self) -> None:
        """Count the held starts below the latest minus the cool-down: below the steady
        part's end for any end still to come. Amortised O(1) per start."""
        assert self.max is not None
        floor = self.max - self._cooldown_ns
        kept = array("q", (t for t in self._tail if t >= floor))
        self._steady += len(self._tail) - len(kept)
        self._tail = kept
        self._compact_at = max(_MIN_COMPACT, 2 * len(kept))

    def steady(self, steady_start: int, steady_end: int) -> int:
        """How many starts lie in ``[steady_start, steady_end)``: the window this stage's
        begin and set_window define (anything else is refused: only it was counted)."""
        if steady_start != self._steady_start:
            raise ValueError("only the steady part set by begin() and set_window() is counted")
        if self._steady_end is not None:
            if steady_end != self._steady_end:
                raise ValueError("the steady part ends where begin() said")
            return self._steady
        if self.max is not None and steady_end < self.max - self._cooldown_ns:
            raise ValueError("the steady part ends at the latest start minus the cool-down")
        return self._steady + sum(1 for t in self._tail if t < steady_end)
