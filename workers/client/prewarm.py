"""Connection pre-warm: open a stage's connections before its clock starts.

A closed-loop stage of N streams starts N requests at once; without open connections
each of them first connects, so the stage's first round is N simultaneous connects (and,
over TLS, handshakes) on one event loop, which delays the sends of that round and the
reads of every stream already answered (measured in benchmarks/end_to_end_accuracy.py).
A real client reuses its connections for the whole stage, so the first round measured
the connect burst, not the endpoint. :func:`prewarm` opens the connections the stage
will use beforehand, ``batch`` at a time so the warm-up itself is no burst, and leaves
them idle in the pool. The count is per origin and shared: connections already idle to
the origin (a previous stage's, another shard's) count towards it, so only the missing
ones are opened. What it did is reported, never hidden: ``prewarmed_connections`` and
``prewarm_ms`` are in the shard's client health (docs/load.md). A connect that fails
stops the warm-up quietly: the stage's own requests then meet the same failure and
record it as their error.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from time import perf_counter_ns

import httpx

from workers.client.transport import ArrivalTransport

__all__ = ["BATCH", "MAX_PREWARM_S", "Prewarmed", "prewarm"]

# Connections opened at once: enough to warm 1,000 streams in a few batches, few enough
# that a server's accept backlog and this loop never see a burst.
BATCH = 64
# The whole warm-up stops after this long (what is open by then stays open).
MAX_PREWARM_S = 30.0


@dataclass(frozen=True, slots=True)
class Prewarmed:
    """What a pre-warm did: connections it opened and how long it took."""

    connections: int
    ms: float

    def fields(self) -> dict[str, int | float]:
        """The shard-health fields (docs/load.md)."""
        return {"prewarmed_connections": self.connections, "prewarm_ms": round(self.ms, 3)}


async def prewarm(
    http: httpx.AsyncClient,
    url: str,
    count: int,
    *,
    connect_timeout_s: float | None = None,
    batch: int = BATCH,
) -> Prewarmed:
    """Leave ``count`` idle connections to ``url``'s origin in ``http``'s pool, opening
    only the missing ones, ``batch`` at a time. Only the arrival transport pools this
    way; with any other client nothing is opened."""
    transport = getattr(http, "_transport", None)  # httpx keeps its transport private
    if not isinstance(transport, ArrivalTransport) or count <= 0:
        return Prewarmed(0, 0.0)
    target = httpx.URL(url)
    start = perf_counter_ns()
    opened = 0
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(MAX_PREWARM_S):
            missing = count - transport.idle_count(target)
            while missing > 0:
                size = min(batch, missing)
                outcomes = await asyncio.gather(
                    *(transport.open_idle(target, connect_timeout_s) for _ in range(size)),
                    return_exceptions=True,
                )
                ok = sum(1 for outcome in outcomes if not isinstance(outcome, BaseException))
                opened += ok
                missing -= size
                if ok < size:
                    break  # refused, unreachable or egress-denied: the requests will say so
    return Prewarmed(opened, (perf_counter_ns() - start) / 1e6)
