"""The ``client-bound`` rule: when a shard's own client distorted the figures it reports.

Arrival stamps come from the kernel (``SO_TIMESTAMPNS``, docs/load.md "The measurement
client"), so a busy or lagging event loop no longer makes TTFT or ITL late by itself.
What still distorts the figures, and is therefore the rule (docs/load.md, "The
``client-bound`` rule"):

=============  =====================================================  =================
reason         figure                                                 threshold
=============  =====================================================  =================
``send_lag``   open loop: p99 of sent − scheduled time, less any      > 20 ms
               ``max_in_flight`` wait (the client's own lateness)
               closed loop: share of the users' time spent waiting    > 5 %
               for the client to send (throughput understated)
``rate``       open loop: achieved ÷ scheduled rate, no cap waits     < 0.95
``not_sent``   open loop: arrivals never sent (the cap was full       > 1 % of arrivals
               when the stage ended)
``read_lag``   token stamps that took a later token's arrival: the    > 1 % of tokens
               client read nothing while two writes of a stream       (ITL p99), or
               landed, and the kernel merged them under the later     > 10 % of the TTFT
               stamp                                                  p99 tail
               without kernel stamps (read time): loop lag p99        > 10 ms
=============  =====================================================  =================

Each shard measures itself (``workers/shard/health.py``) and publishes the figures with
``shard_finished``; these pure functions turn them into a verdict and a note stating the
expected error, shared by the worker, analytics and the API. A stage is judged on its
shards' figures combined (:meth:`ClientHealth.combine`). Event-loop lag and CPU are
published beside the verdict; they explain it but are no reason on their own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = [
    "LOOP_LAG_P99_MS_MAX",
    "MERGED_SHARE_MAX",
    "MERGED_TTFT_TAIL_MAX",
    "NOT_SENT_SHARE_MAX",
    "RATE_RATIO_MIN",
    "SEND_LAG_P99_MS_MAX",
    "SEND_LAG_SHARE_MAX",
    "ClientHealth",
    "client_bound_note",
    "client_bound_reasons",
    "is_client_bound",
]

SEND_LAG_P99_MS_MAX = 20.0
SEND_LAG_SHARE_MAX = 0.05
RATE_RATIO_MIN = 0.95
NOT_SENT_SHARE_MAX = 0.01
MERGED_SHARE_MAX = 0.01
MERGED_TTFT_TAIL_MAX = 0.10
LOOP_LAG_P99_MS_MAX = 10.0


@dataclass(frozen=True, slots=True)
class ClientHealth:
    """A shard's (or a stage's) self-measurement: the ``shard_finished`` fields of the
    same names (docs/load.md).

    ``send_lag_p99_ms`` is the client's own lateness (cap waits excluded);
    ``send_lag_share`` is, in a closed loop, the fraction of the users' time spent waiting
    for the client to send. ``merged_tokens`` counts token stamps that took a later
    token's arrival while the client read nothing, ``merge_error_p99_ms`` bounds their
    error; ``merged_ttft_tail`` counts the first tokens among them whose TTFT is in the
    tail that sets the TTFT p99 (``ttft_tail`` first tokens at or above it), and
    ``merge_error_ttft_ms`` bounds their error.
    ``loop_cpu_util`` is CPU seconds of the loop thread per wall second (−1: unknown).
    """

    load_kind: str = ""
    loop_lag_p99_ms: float = 0.0
    loop_cpu_util: float = 0.0
    schedule_lag_p99_ms: float = 0.0
    send_lag_p99_ms: float = 0.0
    send_lag_share: float = 0.0
    scheduled_rps: float | None = None
    achieved_rps: float | None = None
    cap_waits: int = 0
    requests_sent: int = 0
    not_sent: int = 0
    token_events: int = 0
    merged_tokens: int = 0
    first_tokens: int = 0
    merged_first_tokens: int = 0
    merge_error_p99_ms: float = 0.0
    ttft_tail: int = 0
    merged_ttft_tail: int = 0
    merge_error_ttft_ms: float = 0.0
    kernel_stamps: bool = True

    @classmethod
    def from_fields(cls, fields: Mapping[str, object]) -> ClientHealth:
        """From a ``shard_finished`` event or a stored row (missing figures: healthy)."""

        def number(name: str) -> float | None:
            value = fields.get(name)
            if value is None or value == "":
                return None
            return float(value)  # type: ignore[arg-type] # str/bytes/int/float from Redis

        def count(name: str) -> int:
            return int(number(name) or 0)

        kernel = number("kernel_stamps")
        return cls(
            load_kind=str(fields.get("load_kind") or ""),
            loop_lag_p99_ms=number("loop_lag_p99_ms") or 0.0,
            loop_cpu_util=number("loop_cpu_util") or 0.0,
            schedule_lag_p99_ms=number("schedule_lag_p99_ms") or 0.0,
            send_lag_p99_ms=number("send_lag_p99_ms") or 0.0,
            send_lag_share=number("send_lag_share") or 0.0,
            scheduled_rps=number("scheduled_rps"),
            achieved_rps=number("achieved_rps"),
            cap_waits=count("cap_waits"),
            requests_sent=count("requests_sent"),
            not_sent=count("not_sent"),
            token_events=count("token_events"),
            merged_tokens=count("merged_tokens"),
            first_tokens=count("first_tokens"),
            merged_first_tokens=count("merged_first_tokens"),
            merge_error_p99_ms=number("merge_error_p99_ms") or 0.0,
            ttft_tail=count("ttft_tail"),
            merged_ttft_tail=count("merged_ttft_tail"),
            merge_error_ttft_ms=number("merge_error_ttft_ms") or 0.0,
            kernel_stamps=kernel is None or kernel != 0,  # stored before the field: kernel
        )

    @classmethod
    def combine(cls, shards: Iterable[ClientHealth]) -> ClientHealth:
        """A stage's figures from its shards': counts and rates summed, lags and shares
        the worst shard's (a p99 of a part bounds the whole's from above)."""
        parts = list(shards)
        if not parts:
            return cls()

        def rate(name: str) -> float | None:
            values = [v for p in parts if (v := getattr(p, name)) is not None]
            return sum(values) if values else None

        return cls(
            load_kind=parts[0].load_kind,
            loop_lag_p99_ms=max(p.loop_lag_p99_ms for p in parts),
            loop_cpu_util=max(p.loop_cpu_util for p in parts),
            schedule_lag_p99_ms=max(p.schedule_lag_p99_ms for p in parts),
            send_lag_p99_ms=max(p.send_lag_p99_ms for p in parts),
            send_lag_share=max(p.send_lag_share for p in parts),
            scheduled_rps=rate("scheduled_rps"),
            achieved_rps=rate("achieved_rps"),
            cap_waits=sum(p.cap_waits for p in parts),
            requests_sent=sum(p.requests_sent for p in parts),
            not_sent=sum(p.not_sent for p in parts),
            token_events=sum(p.token_events for p in parts),
            merged_tokens=sum(p.merged_tokens for p in parts),
            first_tokens=sum(p.first_tokens for p in parts),
            merged_first_tokens=sum(p.merged_first_tokens for p in parts),
            merge_error_p99_ms=max(p.merge_error_p99_ms for p in parts),
            ttft_tail=sum(p.ttft_tail for p in parts),
            merged_ttft_tail=sum(p.merged_ttft_tail for p in parts),
            merge_error_ttft_ms=max(p.merge_error_ttft_ms for p in parts),
            kernel_stamps=all(p.kernel_stamps for p in parts),
        )

    @property
    def open_loop(self) -> bool:
        """True for an open loop (a schedule of arrivals), False for a closed loop."""
        return self.load_kind == "open" or self.scheduled_rps is not None

    @property
    def not_sent_share(self) -> float:
        """Fraction of the arrivals that were never sent."""
        planned = self.requests_sent + self.not_sent
        return self.not_sent / planned if planned else 0.0

    @property
    def rate_shortfall(self) -> float:
        """How much lower the achieved rate was than the schedule's (0 when not lower)."""
        if not self.scheduled_rps or self.achieved_rps is None:
            return 0.0
        return max(0.0, 1.0 - self.achieved_rps / self.scheduled_rps)

    @property
    def merged_share(self) -> float:
        """Fraction of the token stamps that took a later token's arrival."""
        return self.merged_tokens / self.token_events if self.token_events else 0.0

    @property
    def itl_distorted(self) -> bool:
        """More than 1 % of the token stamps merged: as many ITL gaps closed to zero and
        as many inflated, which moves the ITL p99."""
        return self.merged_share > MERGED_SHARE_MAX

    @property
    def ttft_distorted(self) -> bool:
        """Merged first tokens make up more than a tenth of the TTFT tail (the first tokens
        at or above the TTFT p99): the p99 moves by up to their error."""
        return self.merged_ttft_tail > MERGED_TTFT_TAIL_MAX * self.ttft_tail


def client_bound_reasons(health: ClientHealth) -> list[str]:
    """Names of the thresholds ``health`` crossed; empty when the client kept up."""
    reasons = []
    if health.open_loop:
        if health.send_lag_p99_ms > SEND_LAG_P99_MS_MAX:
            reasons.append("send_lag")
    elif health.send_lag_share > SEND_LAG_SHARE_MAX:
        reasons.append("send_lag")
    if health.cap_waits == 0 and health.rate_shortfall > 1.0 - RATE_RATIO_MIN:
        reasons.append("rate")
    if health.not_sent_share > NOT_SENT_SHARE_MAX:
        reasons.append("not_sent")
    if health.kernel_stamps:
        if health.itl_distorted or health.ttft_distorted:
            reasons.append("read_lag")
    elif health.loop_lag_p99_ms > LOOP_LAG_P99_MS_MAX:
        reasons.append("read_lag")
    return reasons


def is_client_bound(health: ClientHealth) -> bool:
    """True when the client distorted the shard's (or stage's) figures."""
    return bool(client_bound_reasons(health))


def client_bound_note(health: ClientHealth) -> str:
    """What the client did to the figures and the error to expect, one clause per
    reason crossed ("" when none was)."""
    clauses = []
    reasons = client_bound_reasons(health)
    if "send_lag" in reasons:
        if health.open_loop:
            lag = health.send_lag_p99_ms
            clause = (
                f"p99 send lag {lag:.0f} ms: TTFT and E2E from intent include up to "
                f"{lag:.0f} ms of the client's own delay (timed from the actual send they "
                "do not)"
            )
            if health.rate_shortfall >= 0.005 and "rate" not in reasons:
                clause += f", rates are lower than planned by {health.rate_shortfall:.0%}"
            clauses.append(clause)
        else:
            share = health.send_lag_share
            clauses.append(
                f"virtual users waited {share:.0%} of their time for the client to send "
                f"(p99 {health.send_lag_p99_ms:.0f} ms): throughput and concurrency are "
                f"about {share:.0%} below the level set"
            )
    if "rate" in reasons:
        clauses.append(
            f"sent {health.achieved_rps or 0.0:.1f} of {health.scheduled_rps or 0.0:.1f} "
            f"req/s scheduled: rates are lower than planned by {health.rate_shortfall:.0%}"
        )
    if "not_sent" in reasons:
        planned = health.requests_sent + health.not_sent
        clauses.append(
            f"{health.not_sent} of {planned} arrivals not sent (max_in_flight still full "
            f"when the stage ended): rates are lower than planned by "
            f"{health.not_sent_share:.0%}"
        )
    if "read_lag" in reasons:
        if health.kernel_stamps:
            effects = []
            if health.itl_distorted:
                effects.append(
                    f"{health.merged_share:.1%} of token stamps took a later token's arrival "
                    f"(ITL p99 off by up to {health.merge_error_p99_ms:.0f} ms)"
                )
            if health.ttft_distorted:
                effects.append(
                    f"{health.merged_ttft_tail} of the {health.ttft_tail} first tokens at or "
                    f"above the TTFT p99 took the next token's arrival (TTFT p99 off by up to "
                    f"{health.merge_error_ttft_ms:.0f} ms)"
                )
            clauses.append(
                "reads waited out a stall of the client, so the kernel merged writes under "
                "the later stamp: " + " and ".join(effects)
            )
        else:
            lag = health.loop_lag_p99_ms
            clauses.append(
                f"stamps are read times (no kernel receive stamps) and the loop lagged "
                f"{lag:.0f} ms at p99: TTFT and ITL are late by up to {lag:.0f} ms"
            )
    return "; ".join(clauses)
