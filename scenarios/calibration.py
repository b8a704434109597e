"""The ``client-bound`` rule: when a shard's own client, not the server, limited a stage.

A load generator that saturates its event loop or CPU stamps every event late and sends
requests behind schedule, so the latencies it reports are the client's, not the
server's (docs/load.md, "What a load generator gets wrong"). Each shard measures itself
(``workers/health.py``) and publishes the figures with ``shard_finished``; this pure
function turns them into a verdict that the worker, analytics and the API share. A stage
is client-bound when any of its shards is. Thresholds (docs/load.md):

=========================  =========  ===================================================
figure                     threshold  why
=========================  =========  ===================================================
loop_lag_p99_ms            > 10 ms    every stamp taken on the loop is late by this much
loop_cpu_util              > 0.90     the one loop thread is (nearly) always busy
achieved / scheduled rps   < 0.95     the open loop under-delivered its own schedule
schedule_lag_p99_ms        > 10 ms    requests left late, while no ``max_in_flight``
                                      cap held them (a cap's waits are the user's choice)
=========================  =========  ===================================================

Requests dropped after a capped stage ended (``not_sent``) are a consequence of the
cap, reported beside the verdict but not a reason for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "LOOP_CPU_UTIL_MAX",
    "LOOP_LAG_P99_MS_MAX",
    "RATE_RATIO_MIN",
    "SCHEDULE_LAG_P99_MS_MAX",
    "ClientHealth",
    "client_bound_reasons",
    "is_client_bound",
]

LOOP_LAG_P99_MS_MAX = 10.0
LOOP_CPU_UTIL_MAX = 0.90
RATE_RATIO_MIN = 0.95
SCHEDULE_LAG_P99_MS_MAX = 10.0


@dataclass(frozen=True, slots=True)
class ClientHealth:
    """A shard's self-measurement (the ``shard_finished`` fields of the same names).

    ``loop_cpu_util`` is CPU seconds of the event-loop thread per wall second (1.0 = one
    core), negative when the OS could not say; rates are None for closed loops.
    """

    loop_lag_p99_ms: float
    loop_cpu_util: float
    schedule_lag_p99_ms: float
    scheduled_rps: float | None = None
    achieved_rps: float | None = None
    cap_waits: int = 0
    not_sent: int = 0

    @classmethod
    def from_fields(cls, fields: Mapping[str, object]) -> ClientHealth:
        """From a ``shard_finished`` event or a stored row (missing figures: healthy)."""

        def number(name: str) -> float | None:
            value = fields.get(name)
            if value is None or value == "":
                return None
            return float(value)  # type: ignore[arg-type] # str/bytes/int/float from Redis

        return cls(
            loop_lag_p99_ms=number("loop_lag_p99_ms") or 0.0,
            loop_cpu_util=number("loop_cpu_util") or 0.0,
            schedule_lag_p99_ms=number("schedule_lag_p99_ms") or 0.0,
            scheduled_rps=number("scheduled_rps"),
            achieved_rps=number("achieved_rps"),
            cap_waits=int(number("cap_waits") or 0),
            not_sent=int(number("not_sent") or 0),
        )


def client_bound_reasons(health: ClientHealth) -> list[str]:
    """Names of the thresholds ``health`` crossed; empty when the client kept up."""
    reasons = []
    if health.loop_lag_p99_ms > LOOP_LAG_P99_MS_MAX:
        reasons.append("loop_lag")
    if health.loop_cpu_util > LOOP_CPU_UTIL_MAX:
        reasons.append("loop_cpu")
    if (
        health.scheduled_rps
        and health.achieved_rps is not None
        and health.achieved_rps < RATE_RATIO_MIN * health.scheduled_rps
        and health.cap_waits == 0
    ):
        reasons.append("rate")
    if health.schedule_lag_p99_ms > SCHEDULE_LAG_P99_MS_MAX and health.cap_waits == 0:
        reasons.append("schedule_lag")
    return reasons


def is_client_bound(health: ClientHealth) -> bool:
    """True when the client, not the server, limited the shard."""
    return bool(client_bound_reasons(health))
