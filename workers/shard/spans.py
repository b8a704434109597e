"""Time-ordered stretches of a shard's clock, 16 bytes each, that old ones can leave.

A shard's health (``workers/shard/health.py``) keeps the stretches in which its client
did not read its sockets (read gaps) and those in which its event loop ran late (late
windows). As a list of tuples each took ~120 bytes and every one was kept: up to a few
a second on a loaded machine, for the whole stage, which a one-hour soak showed as a
worker's RSS rising (docs/load.md, "Memory"). :class:`Spans` holds them in two arrays
and drops those no request still running can need; it counts what it dropped, so the
stage's totals stay exact.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterable, Iterator

__all__ = ["Spans"]


class Spans:
    """``(start, end)`` stretches in time order, not overlapping (perf ns)."""

    __slots__ = ("dropped", "ends", "starts")

    def __init__(self, spans: Iterable[tuple[int, int]] = ()) -> None:
        self.starts = array("q")
        self.ends = array("q")
        self.dropped = 0  # stretches let go by drop_ending_before
        for start, end in spans:
            self.add(start, end)

    def add(self, start: int, end: int) -> None:
        """One more stretch, after every one held."""
        self.starts.append(start)
        self.ends.append(end)

    def __len__(self) -> int:
        return len(self.starts)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return zip(self.starts, self.ends, strict=True)

    @property
    def total(self) -> int:
        """Every stretch ever added: those held and those dropped."""
        return len(self.starts) + self.dropped

    def between(self, first: int, last: int) -> Iterator[tuple[int, int]]:
        """The stretches at indices ``first`` to ``last`` (exclusive)."""
        return zip(self.starts[first:last], self.ends[first:last], strict=True)

    def first_ending_at_or_after(self, t: int) -> int:
        """Index of the first stretch that ends at or after ``t`` (``len`` if none)."""
        return bisect.bisect_left(self.ends, t)

    def after_last_starting_at_or_before(self, t: int) -> int:
        """Index just past the last stretch that starts at or before ``t``."""
        return bisect.bisect_right(self.starts, t)

    def drop_ending_before(self, t: int) -> int:
        """Let go of the stretches that ended before ``t``; how many went."""
        count = self.first_ending_at_or_after(t)
        if count:
            del self.starts[:count]
            del self.ends[:count]
            self.dropped += count
        return count
