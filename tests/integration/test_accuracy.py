"""Measured TTFT and ITL against an endpoint with known latencies (the built-in simulator
in its own process), at 1 and 32 concurrent streams.

Tolerances hold on a loaded 2-core machine: medians, not tails, and bounds that allow
a few milliseconds of scheduling noise on top of the simulator's own (timer) lateness.
What is checked is that nothing systematic (a role chunk taken as a token, a stamp
taken after decoding, a client-side queue) moves the medians.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from scenarios.workload.spec import FixedLength, MixClass, Workload
from tests.fakes.load_harness import run_load
from workers.load.closed_loop import ClosedLoop, RequestSource
from workers.prompts.plan import request_planner

# serial: it measures timing (or memory); nothing may run beside it (tests/support/tiers.py).
pytestmark = [pytest.mark.integration, pytest.mark.serial]

TTFT_MS, ITL_MS, TOKENS = 100.0, 10.0, 16
WORKLOAD = Workload(
    mix=[
        MixClass(
            prompt_tokens=FixedLength(dist="fixed", value=32),
            output_tokens=FixedLength(dist="fixed", value=TOKENS),
        )
    ]
)


@pytest.mark.parametrize(
    ("streams", "requests", "ttft_tolerance_ms"), [(1, 15, 8.0), (32, 96, 15.0)]
)
def test_measured_medians_match_the_configured_latencies(
    simulate_endpoint: Callable[..., str], streams: int, requests: int, ttft_tolerance_ms: float
) -> None:
    url = simulate_endpoint(ttft_ms=TTFT_MS, itl_ms=ITL_MS)
    source = RequestSource(request_planner(WORKLOAD, 0, 0), 0, requests, None)
    results, _ = run_load(ClosedLoop(streams, source), url)
    assert len(results) == requests and all(r.ok for _, r in results)
    ttft = np.array([(r.first_token - r.sent) / 1e6 for _, r in results if r.first_token])
    itl = np.concatenate([np.array(r.itl_gaps()) / 1e6 for _, r in results])
    # TTFT is never shorter than configured (the role chunk comes first and is no token)
    assert float(np.min(ttft)) >= TTFT_MS - 1.5  # timers may fire up to 1 ms early
    assert abs(float(np.median(ttft)) - TTFT_MS) < ttft_tolerance_ms, np.median(ttft)
    assert abs(float(np.median(itl)) - ITL_MS) < 2.0, np.median(itl)
    assert all(r.completion_tokens == TOKENS for _, r in results)
