"""What a simulated continuous-batching deployment holds, from its own model.

The batching scheduler (``scheduler.py``) is deterministic, so the capacity a search
should find against it can be computed on virtual time: constant arrivals at a rate, one
stage long, replayed through the scheduler, give each request's TTFT exactly; the
highest rate whose TTFTs pass a judgement (e.g. an SLO attainment with confidence) is the
capacity the simulator predicts for that stage length. Tests and ``benchmarks/
capacity.py`` hold ``load.find_capacity`` against it (docs/answers.md).
"""

from __future__ import annotations

from collections.abc import Callable

from scenarios.model import SimulateSpec
from workers.simulator.scheduler import BatchScheduler, replay

__all__ = ["model_capacity", "stage_ttfts_ms"]


def stage_ttfts_ms(
    spec: SimulateSpec, rate: float, requests: int, duration_s: float, prompt: int, output: int
) -> list[float]:
    """TTFT (ms) of each request of one open-loop stage at a constant ``rate``: at most
    ``requests`` arrivals, none after ``duration_s``."""
    count = min(requests, int(duration_s * rate) + 1)
    arrivals = [(i / rate, prompt, output) for i in range(count)]
    times = replay(BatchScheduler.from_spec(spec), arrivals)
    return [(t[0] - arrival) * 1000 for (arrival, _, _), t in zip(arrivals, times, strict=True)]


def model_capacity(
    holds: Callable[[float], bool], low: float, high: float, precision: float = 0.005
) -> float:
    """The highest rate in [low, high] for which ``holds`` (monotone: it holds below its
    boundary) is true, to ``precision`` (relative, by geometric bisection); ValueError
    when it does not hold at ``low`` or holds at ``high``."""
    if not holds(low) or holds(high):
        raise ValueError(f"the boundary is not between {low:g} and {high:g}")
    while high / low > 1 + precision:
        middle = (low * high) ** 0.5
        low, high = (middle, high) if holds(middle) else (low, middle)
    return low
