"""Garbage-collector tuning of a worker process, and the GC pauses each shard saw.

CPython's cyclic collector stops the whole process while it runs; with thousands of
streams in flight a worker allocates fast, so with the default thresholds (700, 10, 10)
it collects generation 0 hundreds of times a second and walks the long-lived objects of
every imported module in each full collection. A pause lands between a socket becoming
readable and the loop reading it, and TTFT stamps are kernel receive times, so a pause
costs nothing by itself; but it delays sends (schedule lag) and merges token writes that
land while nothing reads (``workers/shard/health.py``). After start-up :func:`tune` collects
once, freezes what survives (``gc.freeze``: modules, settings, the client, the pool; the
collector never scans them again) and raises the thresholds, so young collections are
rarer and old ones cheaper. Reference counting frees almost everything a request makes;
the collector only finds cycles, which the hot path does not make in bulk.

Pauses are always measured (``gc.callbacks``), tuned or not, so that before and after
are compared on the same figures: every shard reports ``gc_collections``,
``gc_pause_total_ms`` and ``gc_pause_max_ms`` of its window (docs/load.md).
"""

from __future__ import annotations

import gc
import threading
from collections import deque
from time import perf_counter_ns

__all__ = ["THRESHOLDS", "GcPauses", "pauses", "tune"]

# Generation 0 collects after this many net allocations (default 700), 1 and 2 after 10
# collections of the younger generation.
THRESHOLDS = (50_000, 10, 10)
# Pauses kept for the shards' windows: at the tuned thresholds a busy worker collects a
# few times a second, so this covers many minutes; older ones age out (bounded memory).
_KEPT = 8192


class GcPauses:
    """Every collection's (end stamp, pause ns, generation), in a bounded ring."""

    def __init__(self, kept: int = _KEPT) -> None:
        self.recent: deque[tuple[int, int, int]] = deque(maxlen=kept)
        self._started = 0
        self._lock = threading.Lock()
        self.installed = False

    def install(self) -> None:
        """Start measuring (idempotent)."""
        with self._lock:
            if not self.installed:
                gc.callbacks.append(self._callback)
                self.installed = True

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        now = perf_counter_ns()
        if phase == "start":
            self._started = now
        elif self._started:
            self.recent.append((now, now - self._started, info.get("generation", 0)))
            self._started = 0

    def window(self, start_ns: int, end_ns: int) -> dict[str, int | float]:
        """Collections that ended in ``[start_ns, end_ns]``: count, total and longest pause."""
        lengths = [pause for end, pause, _ in list(self.recent) if start_ns <= end <= end_ns]
        return {
            "gc_collections": len(lengths),
            "gc_pause_total_ms": round(sum(lengths) / 1e6, 3),
            "gc_pause_max_ms": round(max(lengths, default=0) / 1e6, 3),
        }


pauses = GcPauses()


def tune(enabled: bool) -> bool:
    """Measure GC pauses, and when ``enabled`` collect, freeze the survivors and raise
    the thresholds; returns whether the collector was tuned. Call once after start-up."""
    pauses.install()
    if not enabled:
        return False
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    return True
