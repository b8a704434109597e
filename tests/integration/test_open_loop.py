"""Open-loop load against a real loopback endpoint: coordinated omission and rate fidelity.

The endpoint runs in its own process; the client is the real adapter on uvloop. Rates
and gaps are measured with the client's own stamps, never by timing the test.
"""

from __future__ import annotations

import numpy as np
import pytest

from scenarios.workload.spec import FixedLength, MixClass, Workload
from tests.fakes.load_harness import ks_exponential, run_load, sse_server
from workers.load.open_loop import OpenLoop
from workers.load.schedule import arrival_offsets, part_arrivals, schedule_rng
from workers.prompts.plan import request_planner

# serial: it measures timing (or memory); nothing may run beside it (tests/support/tiers.py).
pytestmark = [pytest.mark.integration, pytest.mark.serial]

WORKLOAD = Workload(
    mix=[
        MixClass(
            prompt_tokens=FixedLength(dist="fixed", value=16),
            output_tokens=FixedLength(dist="fixed", value=3),
        )
    ]
)


def open_loop(
    arrival: str, rps: float, count: int | None, duration_s: float | None, cap: int | None
) -> OpenLoop:
    duration_ns = None if duration_s is None else round(duration_s * 1e9)
    offsets = arrival_offsets(arrival, rps, 1.0, schedule_rng(7, 0))
    arrivals = part_arrivals(offsets, 0, 1, count, duration_ns)
    return OpenLoop(arrivals, request_planner(WORKLOAD, 7, 0), cap, duration_s)


def p99(values: list[float]) -> float:
    return float(np.percentile(values, 99))


def test_a_two_second_stall_shows_in_intent_based_p99_but_not_in_send_based() -> None:
    # 200 arrivals at 20 rps; at most 2 in flight, so while the server is frozen the
    # next arrivals wait for a slot, as a client that waits for its server would. Sent
    # late, they are answered fast: timed from the send, the stall all but vanishes
    # (only the 2 stuck requests, 1 %, saw it); timed from intent it is the tail.
    with sse_server(
        "--ttft-ms", "10", "--itl-ms", "5", "--stall-after", "60", "--stall-s", "2"
    ) as url:
        load = open_loop("constant", 20.0, 200, None, cap=2)
        results, health = run_load(load, url)
    assert len(results) == 200 and all(r.ok for _, r in results)
    ttft_send = [(r.first_token - r.sent) / 1e6 for _, r in results if r.first_token]
    ttft_intent = [(r.first_token - r.intended_start) / 1e6 for _, r in results if r.first_token]
    lag = [(r.sent - r.intended_start) / 1e6 for _, r in results]
    assert p99(ttft_intent) > 1500, p99(ttft_intent)
    assert p99(ttft_send) < 500, p99(ttft_send)
    assert p99(lag) > 1000
    assert load.cap_waits > 0 and load.not_sent == 0
    # The cap, not the client, caused the lag: the client's own send lag leaves the
    # waits out (over a second of them at p99), and no rate verdict is raised for them.
    assert float(health["send_lag_p99_ms"]) < p99(lag) / 10
    assert "rate" not in str(health["client_bound_reasons"])


def test_poisson_at_50_rps_achieves_its_rate_and_exponential_gaps() -> None:
    with sse_server("--ttft-ms", "5", "--itl-ms", "2") as url:
        load = open_loop("poisson", 50.0, None, 20.0, cap=None)
        results, health = run_load(load, url)
    sent = np.sort(np.array([r.sent for _, r in results], dtype=np.int64))
    intended = np.sort(np.array([r.intended_start for _, r in results], dtype=np.int64))
    assert all(r.ok for _, r in results)
    # Rate over the stage by the client's own send stamps, against the target.
    achieved = (len(sent) - 1) / ((sent[-1] - sent[0]) / 1e9)
    assert abs(achieved - 50.0) / 50.0 < 0.05, achieved
    # The schedule itself is exactly exponential (seeded, so this is deterministic) ...
    d, p = ks_exponential(np.diff(intended) / 1e9, 50.0)
    assert p > 0.01, (d, p)
    # ... and what went out on the wire still fits it: lateness is far below the gaps.
    d, p = ks_exponential(np.diff(sent) / 1e9, 50.0)
    assert p > 0.001, (d, p)
    lag_ms = (sent - intended) / 1e6
    assert float(np.median(lag_ms)) < 5.0
    assert health["achieved_rps"] == pytest.approx(achieved, rel=1e-3)


def test_a_stage_bounded_by_duration_counts_what_the_cap_kept_back() -> None:
    # 1 slot, 100 ms answers, 40 rps for 1 s: most arrivals cannot go out before the
    # stage ends; they are counted as not sent, never silently dropped.
    with sse_server("--ttft-ms", "100", "--itl-ms", "1") as url:
        load = open_loop("constant", 40.0, None, 1.0, cap=1)
        results, _ = run_load(load, url)
    assert load.not_sent > 0
    assert len(results) + load.not_sent == 40
