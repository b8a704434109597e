"""GC tuning and the pause figures every shard reports (workers/runtime/gc_tuning.py)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from time import perf_counter_ns

import pytest

from workers.runtime import gc_tuning
from workers.runtime.gc_tuning import THRESHOLDS, GcPauses


@pytest.fixture
def restore_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_pauses_in_a_window_are_counted() -> None:
    pauses = GcPauses()
    pauses.install()
    try:
        start = perf_counter_ns()
        gc.collect()
        gc.collect(0)
        end = perf_counter_ns()
        figures = pauses.window(start, end)
        assert figures["gc_collections"] >= 2
        assert figures["gc_pause_max_ms"] > 0
        assert figures["gc_pause_total_ms"] >= figures["gc_pause_max_ms"]
        # Nothing collected outside the window counts.
        assert pauses.window(end + 1, end + 2)["gc_collections"] == 0
    finally:
        gc.callbacks.remove(pauses._callback)


def test_tune_freezes_and_raises_thresholds_only_when_enabled(restore_gc: None) -> None:
    before = gc.get_threshold()
    assert gc_tuning.tune(False) is False
    assert gc.get_threshold() == before and gc_tuning.pauses.installed
    assert gc_tuning.tune(True) is True
    assert gc.get_threshold() == THRESHOLDS
    assert gc.get_freeze_count() > 0  # the start-up objects are left out of collections


def test_the_pause_ring_is_bounded() -> None:
    pauses = GcPauses(kept=4)
    for _ in range(10):
        pauses._callback("start", {"generation": 0})
        pauses._callback("stop", {"generation": 0})
    assert len(pauses.recent) == 4
