"""Connection pre-warm: open a stage's connections before its clock starts.

A closed-loop stage of N streams starts N requests at once; without open connections
each of them first connects, so the stage's first round is N simultaneous connects (and,
over TLS, handshakes) on one event loop, which delays the sends of that round and the
reads of every stream already answered (measured in benchmarks/end_to_end_accuracy.py).
A real client reuses its connections for the whole stage, so the first round measured
the connect burst, not the endpoint. :func:`prewarmed` opens the connections the stage
will use beforehand, ``batch`` at a time so the warm-up itself is no burst, and leaves
them idle in the pool.

The count is per origin and shared. Every stage registers its count with the pool for
as long as it runs, and a warm-up opens only what the connections open to the origin
(idle, such as a previous stage's, or busy) leave uncovered of everything registered:
the two shards of a 1,000-stream stage warm 512 + 488 connections, not 512 each, nor
512 in all because each counted the other's as its own. What it did is reported, never
hidden: ``prewarmed_connections`` and ``prewarm_ms`` are in the shard's client health
(docs/load.md). A connect that fails stops the warm-up quietly: the stage's own
requests then meet the same failure and record it as their error.

The count is registered even when nothing is opened (pre-warm off), and when the stage
ends its registration is withdrawn and the origin's idle connections beyond what the
stages still running there can use are closed (``ArrivalTransport.trim``): a finished
stage leaves no connections behind on the worker (``concurrency: [3000]`` left 3,000
sockets open for as long as the worker lived), while connections stay reused across
the requests of a stage and shared with the stages running beside it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from time import perf_counter_ns

import httpx

from workers.client.transport import ArrivalTransport

__all__ = ["BATCH", "MAX_PREWARM_S", "Prewarmed", "arrival_transport", "prewarmed"]

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


@asynccontextmanager
async def prewarmed(
    http: httpx.AsyncClient,
    url: str | None,
    count: int,
    *,
    connect_timeout_s: float | None = None,
    batch: int = BATCH,
    warm: bool = True,
) -> AsyncIterator[Prewarmed]:
    """For the stage run inside: ``count`` connections to ``url``'s origin open in
    ``http``'s pool, the missing ones opened first, ``batch`` at a time (none when
    ``warm`` is False: the count is only registered). Afterwards the idle connections
    to the origin that no running stage wants are closed. Only the arrival transport
    pools this way; with any other client, a ``url`` of None or a ``count`` of 0,
    nothing is opened or closed."""
    transport = arrival_transport(http)
    if transport is None or url is None or count <= 0:
        yield Prewarmed(0, 0.0)
        return
    target = httpx.URL(url)
    start = perf_counter_ns()
    missing = transport.want(target, count)
    try:
        if not warm:
            transport.opened_or_given_up(target, missing)
            missing = 0
        opened = await _open(transport, target, missing, connect_timeout_s, batch)
        yield Prewarmed(opened, (perf_counter_ns() - start) / 1e6)
    finally:
        transport.want(target, -count)
        transport.trim(target)


def arrival_transport(http: httpx.AsyncClient) -> ArrivalTransport | None:
    """``http``'s arrival transport, if it has one (the pool pre-warm and trim work on)."""
    transport = getattr(http, "_transport", None)  # httpx keeps its transport private
    return transport if isinstance(transport, ArrivalTransport) else None


async def _open(
    transport: ArrivalTransport,
    target: httpx.URL,
    missing: int,
    connect_timeout_s: float | None,
    batch: int,
) -> int:
    opened = 0
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(MAX_PREWARM_S):
            while missing > 0:
                size = min(batch, missing)
                missing -= size  # each attempt releases its own reservation
                outcomes = await asyncio.gather(
                    *(transport.open_idle(target, connect_timeout_s) for _ in range(size)),
                    return_exceptions=True,
                )
                ok = sum(1 for outcome in outcomes if not isinstance(outcome, BaseException))
                opened += ok
                if ok < size:
                    break  # refused, unreachable or egress-denied: the requests will say so
    transport.opened_or_given_up(target, missing)  # the reservations never tried
    return opened
