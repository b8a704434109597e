"""The automatic sweep (``load.sweep``, docs/answers.md): its rates and its knee.

A sweep measures a synchronous stage (one stream: the rate of requests that never wait)
and a throughput stage (enough streams to saturate: the most the endpoint serves), then
``points`` open-loop rates evenly spaced strictly between the two, per provider.

The knee of a latency-vs-throughput curve is where more load starts to buy latency
instead of throughput. Curvature on a handful of noisy points picks noise, so the knee
here is a rule a reader can check in the table: the point with the highest achieved
request rate whose median TTFT (from intent, for open-loop stages) stays within
``knee_factor`` (default 2×) of the synchronous stage's, among the stages that were not
over-saturated. The median, not the p99: the knee is where the typical request starts
to queue, and a p99 of a few dozen requests is their slowest one (the report shows the
p99 beside it). The synchronous stage is the knee when every loaded point is slower.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["CurvePoint", "knee", "sweep_rates"]


def sweep_rates(synchronous_rps: float, throughput_rps: float, points: int) -> list[float]:
    """``points`` rates evenly spaced strictly between the synchronous and the throughput
    rate (four significant digits). A throughput no higher than the synchronous rate (an
    endpoint that does not batch) spreads them below the synchronous rate instead."""
    low, high = synchronous_rps, throughput_rps
    if high <= low:
        low, high = 0.0, low
    step = (high - low) / (points + 1)
    return [float(f"{low + step * i:.4g}") for i in range(1, points + 1)]


@dataclass(frozen=True, slots=True)
class CurvePoint:
    """One stage of a provider × region's sweep, as the report measured it."""

    stage: int
    role: str  # synchronous | throughput | sweep
    request_rate: float | None  # successful requests per second (steady window)
    ttft_p50_ms: float | None  # from intent for open-loop stages
    saturated: bool = False


def knee(points: Sequence[CurvePoint], factor: float) -> CurvePoint | None:
    """The knee of a sweep's curve (module docstring); None without a synchronous stage
    that measured a TTFT."""
    sync = next((p for p in points if p.role == "synchronous"), None)
    if sync is None or sync.ttft_p50_ms is None:
        return None
    limit = sync.ttft_p50_ms * factor
    within = [
        p
        for p in points
        if not p.saturated
        and p.request_rate is not None
        and p.ttft_p50_ms is not None
        and p.ttft_p50_ms <= limit
    ]
    return max(within, key=lambda p: p.request_rate or 0.0, default=sync)
