"""Arrival schedules of open-loop stages: seeded gaps, one generator per arrival process.

A schedule is a pure function of (seed, stage, process, rate): every part of a stage,
on any worker, computes the same arrival times, and a re-run sends at the same offsets.
Offsets are integer nanoseconds from the stage's start; the executor adds them to one
absolute start stamp, so rounding never accumulates into a rate error (docs/load.md,
"Open loop").
Processes are registered by name (``arrival: poisson`` picks one); callers never branch.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator

__all__ = ["ARRIVALS", "arrival_offsets", "part_arrivals", "schedule_rng"]

NS_PER_S = 1_000_000_000

# A gap generator: (rng, rate in 1/s, burstiness) -> endless gaps in seconds.
GapSource = Callable[[random.Random, float, float], Iterator[float]]

ARRIVALS: dict[str, GapSource] = {}


def _register(name: str) -> Callable[[GapSource], GapSource]:
    def decorate(source: GapSource) -> GapSource:
        ARRIVALS[name] = source
        return source

    return decorate


@_register("constant")
def _constant(_: random.Random, rps: float, __: float) -> Iterator[float]:
    return itertools.repeat(1.0 / rps)


@_register("poisson")
def _poisson(rng: random.Random, rps: float, _: float) -> Iterator[float]:
    while True:
        yield rng.expovariate(rps)


@_register("gamma")
def _gamma(rng: random.Random, rps: float, burstiness: float) -> Iterator[float]:
    # Shape k = burstiness, mean 1/rps: the coefficient of variation is 1/sqrt(k), so
    # k = 1 is Poisson and k < 1 clusters arrivals into bursts separated by long quiet.
    scale = 1.0 / (rps * burstiness)
    while True:
        yield rng.gammavariate(burstiness, scale)


def schedule_rng(seed: int, stage: int) -> random.Random:
    """The generator of a stage's gaps; separate from the request plans' streams."""
    return random.Random(f"{seed}/{stage}/arrivals")  # str seeds hash with SHA-512: stable


def arrival_offsets(
    arrival: str, rps: float, burstiness: float, rng: random.Random
) -> Iterator[int]:
    """Endless arrival offsets (ns from the stage start); the first arrival is at 0.

    Offsets are the running sum of gaps kept in float seconds and rounded once per
    arrival, so the schedule's rate is exact over any length of stage.
    """
    gaps = ARRIVALS[arrival](rng, rps, burstiness)
    elapsed = 0.0
    yield 0
    for gap in gaps:
        elapsed += gap
        yield round(elapsed * NS_PER_S)


def part_arrivals(
    offsets: Iterator[int],
    part: int,
    parts: int,
    count: int | None,
    duration_ns: int | None,
) -> Iterator[tuple[int, int]]:
    """``(seq, offset)`` of this part's arrivals: every ``parts``-th of the stage's, from
    ``part``; at most ``count`` of them, none at or after ``duration_ns``."""
    sent = 0
    for seq, offset in enumerate(offsets):
        if duration_ns is not None and offset >= duration_ns:
            return
        if count is not None and sent >= count:
            return
        if seq % parts == part:
            sent += 1
            yield seq, offset
