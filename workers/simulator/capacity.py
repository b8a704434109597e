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

from scenarios.providers.simulate import SimulateSpec
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
    holds: Callable[[float], bool],
    low: float,
    high: float,
    step: float = 0.01,
    precision: float = 0.001,
) -> float:
    """The rate just below the first one in [low, high] at which ``holds`` fails: scanned
    upwards in relative steps of ``step``, then refined to ``precision`` between the last
    rate that held and the first that did not. Scanning, not bisecting: near its capacity
    the model need not be monotone (constant arrivals can fall in step with the server's
    steps, so a slightly higher rate may hold again), and the first failure is the
    capacity a search from below can claim. ValueError when it does not hold at ``low``
    or holds all the way to ``high``."""
    if not holds(low):
        raise ValueError(f"the boundary is not between {low:g} and {high:g}: fails at {low:g}")
    held, rate = low, low * (1 + step)
    while holds(rate):
        held, rate = rate, rate * (1 + step)
        if rate > high:
            raise ValueError(f"the boundary is not between {low:g} and {high:g}: holds at {high:g}")
    while rate / held > 1 + precision:
        middle = (held * rate) ** 0.5
        held, rate = (middle, rate) if holds(middle) else (held, middle)
    return held
