"""The shard's load shape: the closed loop (virtual users) or the open loop (a seeded
arrival schedule, or a replayed traffic log), behind one interface.

``build_load`` picks the shape from the shard spec; the shard executes it without
knowing which it is. docs/load.md describes the shapes for users.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, Protocol

from scenarios.datasets.files import FileEntry, WorkloadFileError
from scenarios.wire.contract import ShardSpec
from workers.client.result import RequestResult
from workers.load.closed_loop import ClosedLoop, RequestSource
from workers.load.intended import IntendedStarts
from workers.load.open_loop import OpenLoop
from workers.load.schedule import NS_PER_S, arrival_offsets, part_arrivals, schedule_rng
from workers.load.sessions import SessionLoad
from workers.prompts.plan import PlannedRequest

__all__ = ["LoadShape", "build_load", "connections_needed", "rate_figures", "stage_offsets"]


class LoadShape(Protocol):
    """What a shard needs of its load: run it, stop it, and where its stage began/ends."""

    @property
    def kind(self) -> str:
        """``closed`` or ``open``."""
        ...

    @property
    def start_ns(self) -> int:
        """When the stage began (perf ns)."""
        ...

    @property
    def intended(self) -> IntendedStarts:
        """Intended starts of the requests sent, as counts (workers/load/intended.py)."""
        ...

    @property
    def stopped(self) -> bool:
        """True once :meth:`stop` was called."""
        ...

    def stop(self) -> None:
        """Send no further requests."""

    async def run(
        self,
        send: Callable[[PlannedRequest, int], Awaitable[RequestResult]],
        record: Callable[[PlannedRequest, RequestResult], None],
    ) -> None:
        """Send the shard's requests; return when all ended."""

    def planned_end_ns(self) -> int:
        """End of the stage window (perf ns)."""
        ...


def stage_offsets(spec: ShardSpec, entries: Sequence[FileEntry] = ()) -> Iterator[int]:
    """Offsets (ns from the stage start) of every arrival of the spec's open-loop stage;
    a replay's come from its dataset ``entries`` (in timestamp order)."""
    rate = spec.rate
    assert rate is not None, "closed-loop shards have no schedule"
    if rate.replay:
        assert spec.workload.replay is not None
        if not entries:
            raise WorkloadFileError("the replay dataset was not loaded")
        first = entries[0].timestamp_s or 0.0
        scale = spec.workload.replay.time_scale
        return (round(((e.timestamp_s or 0.0) - first) * scale * NS_PER_S) for e in entries)
    return arrival_offsets(
        rate.arrival, rate.rps, rate.burstiness, schedule_rng(spec.seed, spec.stage)
    )


def build_load(
    spec: ShardSpec,
    plan: Callable[[int], PlannedRequest],
    entries: Sequence[FileEntry] = (),
) -> LoadShape:
    """The shard's load shape: open loop when the spec has a rate, else closed loop;
    ``entries`` are the replay dataset's (for its arrival times)."""
    if spec.rate is None:
        source = RequestSource(plan, spec.seq_start, spec.requests, spec.duration_s)
        # A user beyond the requests would never send: none is started for it.
        users = spec.concurrency if spec.requests is None else min(spec.concurrency, spec.requests)
        return ClosedLoop(max(users, 1), source, spec.duration_s)
    duration_ns = None if spec.duration_s is None else round(spec.duration_s * NS_PER_S)
    arrivals = part_arrivals(
        stage_offsets(spec, entries), spec.rate.part, spec.rate.parts, spec.requests, duration_ns
    )
    return OpenLoop(arrivals, plan, spec.rate.max_in_flight, spec.duration_s)


# An open loop without a cap gets one second of its arrivals pre-warmed, at most this many.
_MAX_OPEN_PREWARM = 1024


def connections_needed(spec: ShardSpec) -> int:
    """Connections the shard's stage will hold open at once, to pre-warm
    (``workers/client/prewarm.py``) and to check against the worker's descriptor budget
    (``workers/runtime/fd_budget.py``): a closed loop's streams; an open loop's cap, or one
    second of its arrivals (its concurrency depends on the server's latency). Never
    more than the shard's requests (or sessions): a stream or slot beyond them never
    sends, so a connection opened for it would only sit idle (a plan made before the
    planner clamped streams could still ask for 50,000 streams for one request)."""
    if spec.rate is None:
        needed = spec.concurrency
    else:
        share = math.ceil(spec.rate.rps / spec.rate.parts)
        cap = spec.rate.max_in_flight
        needed = min(share if cap is None else min(cap, share), _MAX_OPEN_PREWARM)
    return needed if spec.requests is None else min(needed, spec.requests)


def rate_figures(load: LoadShape, target_rps: float | None) -> dict[str, Any]:
    """Keyword arguments of ``ShardHealth.summary`` describing an open loop's schedule:
    its target and scheduled rates, what its ``max_in_flight`` cap did, and each send's
    lateness beyond its cap wait. An open loop of sessions reports its session rate as
    the target but no scheduled rate: the requests sent (turns) are not its arrivals."""
    if isinstance(load, SessionLoad):
        if not isinstance(load.inner, OpenLoop):
            return {}
        return {
            "target_rps": target_rps,
            "cap_waits": load.inner.cap_waits,
            "not_sent": load.inner.not_sent,
            "send_lags_ns": load.inner.send_lags_ns,
        }
    if not isinstance(load, OpenLoop):
        return {}
    span = load.scheduled_span_ns()
    scheduled = (len(load.intended) - 1) / (span / NS_PER_S) if span > 0 else None
    return {
        "target_rps": target_rps,
        "scheduled_rps": scheduled,
        "cap_waits": load.cap_waits,
        "not_sent": load.not_sent,
        "send_lags_ns": load.send_lags_ns,
    }
