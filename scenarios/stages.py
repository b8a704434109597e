"""How a stage's load is described, derived in one place: its kind and its label.

- :func:`load_kind`: a shard (or stage) without a rate runs a closed loop (virtual
  users), one with a rate an open loop (a seeded arrival schedule, or a replayed log).
  The records' ``load_kind`` column, the client's health, the load shape a worker builds
  and the control plane's saturation check all read it from here.
- :func:`stage_label`: how a stage is named to users, from its level: ``concurrency 8``,
  ``rate 5 rps, ≤8 in flight``; compact in a report's charts and figures
  (``stage 2 · c=32``).
"""

from __future__ import annotations

from typing import Literal, Protocol

from scenarios.wire.contract import ShardRate

LoadKind = Literal["closed", "open"]


class HasRate(Protocol):
    """A shard spec, or anything else with a shard's open-loop part."""

    @property
    def rate(self) -> ShardRate | None: ...


def load_kind(spec: HasRate) -> LoadKind:
    """``closed`` for a shard without a rate (virtual users), ``open`` for one with a
    rate: seeded arrivals, or a replay (``rate.replay``)."""
    return "closed" if spec.rate is None else "open"


def scheduled_rate(spec: HasRate) -> ShardRate | None:
    """The shard's open-loop rate when it follows a seeded schedule (None for a closed
    loop and for a replay, whose arrivals come from its log)."""
    return None if spec.rate is None or spec.rate.replay else spec.rate


def stage_label(
    concurrency: int, rate: float | None = None, index: int | None = None, compact: bool = False
) -> str:
    """How a stage is named to users: its load level (``concurrency 8``, or ``rate 5
    rps`` with its ``≤8 in flight`` cap), after its index when given. ``compact`` is the
    report's short form (``stage 2 · c=32``; a level without streams is left out)."""
    if compact:
        level = f"c={concurrency}" if concurrency else ""
        if rate is not None:
            level = f"{rate:g} rps" + (f" ≤{concurrency}" if concurrency else "")
    elif rate is None:
        level = f"concurrency {concurrency}"
    else:
        level = f"rate {rate:g} rps" + (f", ≤{concurrency} in flight" if concurrency else "")
    named = [f"stage {index}"] if index is not None else []
    return " · ".join([*named, level] if level else named)
