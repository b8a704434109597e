"""Over-saturation of an open-loop stage, judged while it runs (docs/answers.md).

An open loop never waits for the server, so above the endpoint's capacity its queue
grows for as long as the stage lasts, and its latencies measure the stage's length, not
the endpoint. The control plane judges each provider × region of a running open-loop
stage from what it already has: the shards' progress (requests sent and ended, hence in
flight) and the stored records (TTFT from intent, which includes any wait for the
client's cap). The stage's span so far is cut into quarters, and the stage is
over-saturated when both hold:

- **latency grows without bound**: the median TTFT from intent of the requests intended
  to start in each quarter rises from quarter to quarter, and the last is at least twice
  the first plus 50 ms;
- **the queue grows**: the mean number of requests in flight rises from quarter to
  quarter and the last is at least twice the first plus 4; or, under ``max_in_flight``,
  the second half stays at the cap (arrivals wait for slots); or fewer than 75 % of the
  offered arrivals per second end during the second half (arrivals no longer served).

Strictly rising quarters and a doubling are what a queue that grows linearly shows and
what a stable one, however loaded, almost never does by chance: a false alarm would
stop a stage whose figures were fine, so the rule errs towards not stopping. A stage is
judged only after ``saturation.min_s`` seconds and ``saturation.min_requests`` ended
requests in that region.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

__all__ = ["ShardSamples", "StageSnapshot", "judge", "quarter_in_flight"]

LATENCY_FACTOR = 2.0
LATENCY_FLOOR_MS = 50.0
QUEUE_FACTOR = 2.0
QUEUE_FLOOR = 4.0
PINNED_SHARE = 0.95
SERVED_SHARE = 0.75
GRID_POINTS = 32  # in-flight is read at this many instants over the span so far


@dataclass(frozen=True, slots=True)
class ShardSamples:
    """A shard's progress reports: (seconds since its stage began, sent, ended)."""

    samples: Sequence[tuple[float, int, int]]

    def at(self, t: float) -> tuple[int, int]:
        """Sent and ended at ``t``: the last report at or before it (0, 0 before any)."""
        sent = done = 0
        for when, s, d in self.samples:
            if when > t:
                break
            sent, done = s, d
        return sent, done


@dataclass(frozen=True, slots=True)
class StageSnapshot:
    """One provider × region of a running open-loop stage, as the control plane sees it."""

    elapsed_s: float
    completed: int
    offered_rps: float
    cap: int | None  # the region's max_in_flight (None: none)
    shards: Sequence[ShardSamples]
    ttft_quarters_ms: Sequence[float | None]  # median TTFT from intent per quarter


def _span(snapshot: StageSnapshot) -> tuple[float, float]:
    """From the first progress report of the region's shards to the stage clock now."""
    firsts = [shard.samples[0][0] for shard in snapshot.shards if shard.samples]
    start = min(firsts, default=0.0)
    return start, max(start, snapshot.elapsed_s)


def quarter_in_flight(snapshot: StageSnapshot) -> list[float]:
    """Mean requests in flight (sent − ended, summed over the region's shards) in each
    quarter of the span reported so far, read on a regular grid."""
    start, end = _span(snapshot)
    grid = [start + (end - start) * (i + 0.5) / GRID_POINTS for i in range(GRID_POINTS)]
    values = []
    for t in grid:
        sent_done = [shard.at(t) for shard in snapshot.shards]
        values.append(float(sum(s - d for s, d in sent_done)))
    size = GRID_POINTS // 4
    return [sum(values[q * size : (q + 1) * size]) / size for q in range(4)]


def _served_rps(snapshot: StageSnapshot) -> float:
    """Requests ended per second during the second half of the span reported so far."""
    start, end = _span(snapshot)
    middle = (start + end) / 2
    ended = [shard.at(end)[1] - shard.at(middle)[1] for shard in snapshot.shards]
    return sum(ended) / (end - middle) if end > middle else 0.0


def _rising(values: Sequence[float], factor: float, floor: float) -> bool:
    return all(b > a for a, b in pairwise(values)) and values[-1] >= factor * values[0] + floor


def judge(
    snapshot: StageSnapshot, min_s: float, min_requests: int
) -> tuple[str, dict[str, Any]] | None:
    """(reason, evidence) when the snapshot shows over-saturation, else None."""
    if snapshot.elapsed_s < min_s or snapshot.completed < min_requests:
        return None
    latency = list(snapshot.ttft_quarters_ms)
    if len(latency) != 4 or any(v is None for v in latency):
        return None
    ttft = [float(v or 0.0) for v in latency]
    if not _rising(ttft, LATENCY_FACTOR, LATENCY_FLOOR_MS):
        return None
    in_flight = quarter_in_flight(snapshot)
    served = _served_rps(snapshot)
    signals = []
    if _rising(in_flight, QUEUE_FACTOR, QUEUE_FLOOR):
        signals.append("in flight growing")
    if snapshot.cap is not None and min(in_flight[2:]) >= PINNED_SHARE * snapshot.cap:
        signals.append("in flight pinned at the cap")
    if served < SERVED_SHARE * snapshot.offered_rps:
        signals.append("arrivals no longer served")
    if not signals:
        return None
    evidence: dict[str, Any] = {
        "ttft_from_intent_ms": [round(v, 1) for v in ttft],
        "in_flight": [round(v, 1) for v in in_flight],
        "offered_rps": round(snapshot.offered_rps, 3),
        "served_rps": round(served, 3),
        "cap": snapshot.cap,
        "elapsed_s": round(snapshot.elapsed_s, 1),
        "completed": snapshot.completed,
        "signals": ["latency growing", *signals],
    }
    reason = (
        f"TTFT from intent rose {ttft[0]:,.0f} → {ttft[-1]:,.0f} ms over "
        f"{snapshot.elapsed_s:.0f} s while in flight went {in_flight[0]:.0f} → "
        f"{in_flight[-1]:.0f} ({snapshot.offered_rps:.3g} req/s offered, {served:.3g} served)"
    )
    return reason, evidence
