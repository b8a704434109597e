"""How one load level is split into parts: shards of bounded size (docs/scaling.md).

A closed-loop level is split into parts of at most ``max_streams_per_shard`` streams,
an open-loop level into parts of at most ``max_rps_per_shard`` arrivals per second (and
of its ``max_in_flight`` cap); a region with several live worker processes gets each
level split into as many parts, as long as each keeps at least ``MIN_STREAMS_PER_PART``
streams or ``MIN_RPS_PER_PART`` arrivals per second. The sizes are checked against
MAX_SHARDS_PER_RUN before any shard is built. ``api/control/planner.py`` builds the
stages' shards from these counts.
"""

from __future__ import annotations

import math

from scenarios.limits import MAX_SHARDS_PER_RUN
from scenarios.loader import Problem, ScenarioError
from scenarios.model import Scenario

DEFAULT_MAX_STREAMS_PER_SHARD = 512
# What one worker process sends comfortably with room for its token events
# (benchmarks/client_capacity.py; docs/load.md).
DEFAULT_MAX_RPS_PER_SHARD = 200.0
# Smallest part a stage is split into to spread it over a region's worker processes.
MIN_STREAMS_PER_PART = 64
MIN_RPS_PER_PART = 25.0


def split(total: int, parts: int) -> list[int]:
    """``total`` divided into ``parts`` integers differing by at most one."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def closed_streams(concurrency: int, requests: int | None) -> int:
    """Streams a closed-loop stage of ``requests`` requests (or sessions) runs at once:
    its ``concurrency``, but never more than it has requests to send. A stream beyond
    the requests would never send one, yet each costs a pre-warmed connection and a
    slot of a shard (``concurrency: [100000]`` with 2 requests was two shards of 50,000
    streams, whose pre-warm exhausted a worker's descriptors; docs/scaling.md)."""
    return concurrency if requests is None else max(1, min(concurrency, requests))


def closed_parts(
    concurrency: int, requests: int | None, max_streams_per_shard: int, workers: int = 1
) -> int:
    """Shards one provider and region of a closed-loop stage is split into, with
    ``workers`` live worker processes in the region."""
    concurrency = closed_streams(concurrency, requests)
    parts = math.ceil(concurrency / max_streams_per_shard)
    parts = max(parts, min(workers, concurrency // MIN_STREAMS_PER_PART))
    if requests is not None:
        parts = min(parts, requests)  # never a shard with nothing to send
    return max(parts, 1)


def open_parts(
    rps: float,
    max_in_flight: int | None,
    requests: int | None,
    max_streams_per_shard: int,
    max_rps_per_shard: float,
    workers: int = 1,
) -> int:
    """Shards one provider and region of an open-loop stage is split into, with
    ``workers`` live worker processes in the region."""
    parts = math.ceil(rps / max_rps_per_shard)
    parts = max(parts, min(workers, math.floor(rps / MIN_RPS_PER_PART)))
    if max_in_flight is not None:
        max_in_flight = open_cap(max_in_flight, requests)
        parts = max(parts, math.ceil(max_in_flight / max_streams_per_shard))
        parts = min(parts, max_in_flight)  # every part needs a slot of the cap
    if requests is not None:
        parts = min(parts, requests)  # never a shard with nothing to send
    return max(parts, 1)


def open_cap(max_in_flight: int, requests: int | None) -> int:
    """An open loop's in-flight cap, never above the requests it sends (a request
    beyond them never needs a slot or a connection)."""
    return max_in_flight if requests is None else max(1, min(max_in_flight, requests))


def check_level_size(scenario: Scenario, path: str, parts: int, max_streams: int) -> None:
    """Refuse one load level that alone needs more than MAX_SHARDS_PER_RUN shards of at
    most ``max_streams`` streams (``parts`` summed over its regions, for one provider),
    naming the level's field path: planning it as fewer, larger shards would hand one
    worker process more streams (and connections) than it can serve."""
    shards = parts * len(scenario.providers)
    if shards > MAX_SHARDS_PER_RUN:
        message = (
            f"this level needs {shards} shards of at most {max_streams} streams (the "
            f"per-shard stream bound, max_streams_per_shard) over its providers and "
            f"regions, more than the {MAX_SHARDS_PER_RUN} a run may have: lower it, or "
            "bound it with fewer requests_per_level"
        )
        raise ScenarioError([Problem(path, message)])


def check_plan_size(scenario: Scenario, parts: int) -> None:
    """Refuse a plan of more than MAX_SHARDS_PER_RUN shards (``parts`` summed over the
    stages and regions, for one provider), before any shard is built."""
    shards = parts * len(scenario.providers)
    if shards > MAX_SHARDS_PER_RUN:
        message = (
            f"the run would have {shards} shards (providers × regions × stages × the parts "
            f"a large level is split into), more than the {MAX_SHARDS_PER_RUN} a run may "
            "have: use fewer or smaller levels, fewer providers or regions, or split the run"
        )
        raise ScenarioError([Problem("load", message)])
